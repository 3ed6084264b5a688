package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/appliance-sh/appliance/app/config"
)

// approvalWorkflow is a task that waits for a person before its last step.
const approvalWorkflow = `
tasks:
  ship:
    description: Wait for a person to approve, then ship.
    folder: release/gated
    input:
      version:
        type: string
        default: "1.0"
    flow:
      ask:
        type: approval
        message: "Ship {{ input.version }}?"
      ship:
        depends_on: [ask]
        type: script
        script: echo "shipping {{ input.version }}"
`

// chromiumPath finds a Chromium or Chrome binary. Without one the browser
// tests skip, unless APPLIANCE_REQUIRE_BROWSER=1 (CI installs Chromium).
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("APPLIANCE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium binary found (tried chromium, chromium-browser, google-chrome, headless-shell) and APPLIANCE_REQUIRE_BROWSER=1")
	}
	t.Skip("no Chromium binary found; install chromium to run the browser tests")
	return ""
}

// browser is one headless Chromium tab, with the page's console errors
// collected so a test fails on any uncaught exception.
type browser struct {
	t      testing.TB
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	// violations are the Content Security Policy violations of every page
	// the tab showed: the UI must work under the server's CSP, so any is a
	// failure.
	violations []string
	shots      int
}

// reportViolations makes every document of the tab report its CSP
// violations to the test, however the page was reached.
const reportViolations = `document.addEventListener('securitypolicyviolation', (e) =>
  window.reportCSPViolation(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') +
    ' at ' + e.sourceFile + ':' + e.lineNumber));`

func newBrowser(t testing.TB) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1280, 900),
		// The sandbox needs user namespaces, which containers and root lack.
		chromedp.NoSandbox,
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx}
	// The first action starts the browser under ctx itself: a deadline on it
	// would stop the browser, so the deadline goes on the steps after it.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	err := chromedp.Do(ctx,
		chromedp.ExposeFunc("reportCSPViolation", func(_ context.Context, v string) (chromedp.Void, error) {
			b.mu.Lock()
			b.violations = append(b.violations, v)
			b.mu.Unlock()
			return chromedp.Void{}, nil
		}),
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: reportViolations})
			return err
		}),
	)
	if err != nil {
		t.Fatalf("watch for CSP violations: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			switch {
			case strings.Contains(m.Text, "Content Security Policy"):
				// The browser's own report of a violation (source "security").
				b.violations = append(b.violations, m.String())
			// A failed request is logged by the browser itself (source
			// "network"); the UI shows those answers, and tests check it.
			case m.IsException() || (m.Type == chromedp.ConsoleError && m.Source != "network"):
				b.errors = append(b.errors, m.String())
			}
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("browser console: %s", e)
		}
		for _, v := range b.violations {
			t.Errorf("Content Security Policy violation: %s", v)
		}
	})
	return b
}

// takeViolations returns the CSP violations so far and forgets them.
func (b *browser) takeViolations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.violations
	b.violations = nil
	return v
}

// do runs steps with a deadline, failing the test with what was being done.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.screenshot("failed-" + strings.ReplaceAll(what, " ", "-"))
		// What the page said, for a failure seen only in CI.
		tctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		text, terr := chromedp.Run(tctx, chromedp.Evaluate[string](`(document.querySelector('main')?.innerText ?? '').slice(-3000)`))
		b.t.Fatalf("%s: %v\nthe page's text (%v), its end:\n%s", what, err, terr, text)
	}
}

// screenshot saves the page in the test's temp dir, and also in
// APPLIANCE_SCREENSHOT_DIR when set, to look at by hand.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	b.shots++
	dirs := []string{b.t.TempDir()}
	if d := os.Getenv("APPLIANCE_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			b.t.Errorf("save screenshot: %v", err)
		}
	}
}

// pageText waits until the page's visible text contains want.
func pageText(want string) chromedp.Action[chromedp.Void] {
	js, _ := json.Marshal(want)
	return chromedp.Poll[chromedp.Void]("document.body.innerText.includes("+string(js)+")",
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

func TestBrowserRunsHelloWorldFromTheDashboardAndFollowsItsLog(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)

	b.do("open the dashboard",
		chromedp.Navigate(f.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/examples/hello-world"]`)),
		pageText("basics"),
	)
	b.screenshot("dashboard")

	b.do("open hello-world",
		chromedp.Click(chromedp.CSS(`a[href="/tasks/examples/hello-world"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form input[name="name"]`)),
		pageText("Who to greet"),
	)
	b.screenshot("task")

	b.do("run it with name=Ada",
		chromedp.SetValue(chromedp.CSS(`form.run-form input[name="name"]`), "Ada"),
		chromedp.Click(chromedp.CSS(`form.run-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
		pageText("the first step said: Hello, Ada!"),
		pageText("complete"),
	)
	b.screenshot("job")

	// The page shows what the API holds.
	id, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname.split('/').pop()`))
	if err != nil {
		t.Fatal(err)
	}
	j := f.job(id)
	if j.Status != "completed" || j.Input["name"] != "Ada" {
		t.Errorf("job %s: status %s, input %v", id, j.Status, j.Input)
	}

	b.do("filter the log by step",
		chromedp.SetValue(chromedp.CSS(`#log-step`), "say-hello"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#log-step').dispatchEvent(new Event('change'))`),
		chromedp.Poll[chromedp.Void](`!document.querySelector('.log').innerText.includes('the first step said')`+
			` && document.querySelector('.log').innerText.includes('preparing a greeting for Ada')`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)

	b.do("list the job on the jobs page",
		chromedp.Click(chromedp.CSS(`header nav a[href="/jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/`+id+`"]`)),
		pageText("1–1 of 1"),
	)
	b.screenshot("jobs")

	b.do("open the in-process worker and see its steps",
		chromedp.Click(chromedp.CSS(`header nav a[href="/workers"]`)),
		chromedp.WaitVisible(chromedp.CSS(`main a[href^="/workers/"]`)),
		chromedp.Click(chromedp.CSS(`main a[href^="/workers/"]`)),
		pageText("Recent steps (2 of 2)"),
		pageText("echo-greeting"),
	)
	b.screenshot("worker")
}

func TestBrowserApprovesAWaitingStepFromTheJobPage(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(approvalWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"gated": dir}, 1)
	id := f.execute("gated", "ship", map[string]any{"version": "2.5"})
	f.waitJob(id, "ask waiting", func(j jobView) bool { return j.step("ask").Status == "waiting" })

	b.do("open the waiting job",
		chromedp.Navigate(f.url+"/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#approvals .approval[data-step="ask"] button`)),
		pageText("Ship 2.5?"),
	)
	b.screenshot("approval")

	b.do("approve it",
		chromedp.Click(chromedp.CSS(`#approvals .approval[data-step="ask"] button:not(.danger)`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
		pageText("shipping 2.5"),
	)
	b.screenshot("approved")

	j := f.job(id)
	out, _ := j.step("ask").Output.(map[string]any)
	if j.Status != "completed" || out["approved"] != true {
		t.Errorf("after approving in the browser: job %s, ask output %v", j.Status, j.step("ask").Output)
	}
}

// The run form's rules, checked in the browser that runs them.
func TestBrowserRunFormPayloadRules(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	b.do("load the UI", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))

	cases := []struct {
		name   string
		defs   string
		raw    string
		input  string
		errors int
	}{
		{"empty fields are omitted so the server applies defaults", `{"a":{"type":"string","default":"x"},"b":{"type":"string"}}`, `{"a":"","b":""}`, `{}`, 0},
		{"text is sent as typed", `{"a":{"type":"text"}}`, `{"a":"two\nlines"}`, `{"a":"two\nlines"}`, 0},
		{"integers and numbers are numbers", `{"n":{"type":"integer"},"x":{"type":"number"}}`, `{"n":"42","x":"2.5"}`, `{"n":42,"x":2.5}`, 0},
		{"a fraction is no integer", `{"n":{"type":"integer"}}`, `{"n":"1.5"}`, `{}`, 1},
		{"booleans are always sent", `{"b":{"type":"boolean","default":true}}`, `{"b":false}`, `{"b":false}`, 0},
		{"an untouched secret with a default is omitted", `{"s":{"type":"string","secret":true,"default":"{{ secret.X }}"}}`, `{"s":""}`, `{}`, 0},
		{"a typed secret is sent", `{"s":{"type":"string","secret":true,"default":"d"}}`, `{"s":"new"}`, `{"s":"new"}`, 0},
		{"dates and options are strings", `{"d":{"type":"date"},"o":{"type":"string","options":["a","b"]}}`, `{"d":"2025-01-02","o":"b"}`, `{"d":"2025-01-02","o":"b"}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expr := `import(document.querySelector('script[type=module]').src.replace(/app\.js$/, 'form.js'))` +
				`.then(m => m.toPayload(` + c.defs + `, ` + c.raw + `))`
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
			defer cancel()
			got, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
				Input  json.RawMessage `json:"input"`
				Errors []string        `json:"errors"`
			}](expr, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			var gotInput, wantInput any
			if err := json.Unmarshal(got.Input, &gotInput); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.input), &wantInput); err != nil {
				t.Fatal(err)
			}
			g, _ := json.Marshal(gotInput)
			w, _ := json.Marshal(wantInput)
			if string(g) != string(w) || len(got.Errors) != c.errors {
				t.Errorf("payload %s, errors %q; want %s with %d errors", g, got.Errors, w, c.errors)
			}
		})
	}
}

func TestBrowserTaskPageOrdersFieldsAndShowsServerErrors(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	b.do("open release",
		chromedp.Navigate(f.url+"/tasks/examples/release"),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form select[name="channel"]`)),
	)
	b.screenshot("release")
	names, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('form.run-form [name]')].map(e => e.name)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "version,channel" {
		t.Errorf("fields %v, want version,channel", names)
	}
	b.do("run without the required version",
		chromedp.Click(chromedp.CSS(`form.run-form button[type="submit"]`)),
		pageText(`input "version": required`),
	)

	b.do("open pipeline",
		chromedp.Navigate(f.url+"/tasks/examples/pipeline"),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form input[name="dry_run"][type="checkbox"]`)),
		pageText("nightly-pipeline"),
	)
	b.screenshot("pipeline")
	names, err = chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('form.run-form [name]')].map(e => e.name)`))
	if err != nil {
		t.Fatal(err)
	}
	// `order` first (dry_run 1, targets 2), then the rest in file order.
	if strings.Join(names, ",") != "dry_run,targets,fail_tests" {
		t.Errorf("fields %v, want dry_run,targets,fail_tests", names)
	}
}

func TestBrowserNestsForEachInstancesUnderTheirStep(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	id := f.execute("examples", "release", map[string]any{"version": "3.1"})
	f.waitTerminal(id)

	b.do("open the release job",
		chromedp.Navigate(f.url+"/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
		pageText("publishing 3.1 for arm64"),
	)
	b.screenshot("for-each")
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('table.steps tbody tr')].map(r => (r.classList.contains('instance') ? '  ' : '') + r.dataset.step)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows, "|"); got != "tag|publish|  publish[0]|  publish[1]" {
		t.Errorf("step rows %q", got)
	}
}

func TestBrowserCancelsALiveJob(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 1)
	id := f.execute("examples", "sleep", map[string]any{"seconds": 300})
	f.waitJob(id, "sleep running", func(j jobView) bool { return j.step("sleep").Status == "running" })

	b.do("cancel it from its page",
		chromedp.Navigate(f.url+"/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`.title-row button.danger`)),
		chromedp.Click(chromedp.CSS(`.title-row button.danger`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-cancelled`)),
		chromedp.Poll[chromedp.Void](`!document.querySelector('.title-row button.danger')`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
	if j := f.job(id); j.Status != "cancelled" {
		t.Errorf("job status %s after Cancel", j.Status)
	}
}

// The UI runs under the server's Content Security Policy, and the tests
// above fail on any violation. This one checks that net is there: markup
// the UI must never use is refused and reported.
func TestBrowserEnforcesAndReportsTheContentSecurityPolicy(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	b.do("load the UI", chromedp.Navigate(f.url+"/"), chromedp.WaitVisible(chromedp.CSS(`main h1`)))
	b.do("inject an inline script and an inline style",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const s = document.createElement('script');
			s.textContent = 'window.injected = true';
			document.head.append(s);
			document.body.setAttribute('style', 'background: red');
		})()`),
	)
	// Both channels must see both: the page's securitypolicyviolation
	// events and the browser's console reports.
	want := []string{"script-src-elem blocked inline", "style-src-attr blocked inline", "inline script violates", "inline style violates"}
	var got []string
	missing := want
	for deadline := time.Now().Add(10 * time.Second); len(missing) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = append(got, b.takeViolations()...)
		joined := strings.Join(got, "\n")
		missing = slices.DeleteFunc(slices.Clone(want), func(w string) bool { return strings.Contains(joined, w) })
	}
	if len(missing) > 0 {
		t.Fatalf("violations reported: %q; missing %q", got, missing)
	}
	ran, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.injected === true`))
	if err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Fatal("an inline script ran under the CSP")
	}
	t.Logf("reported: %q", got)
}

func TestBrowserTaskPageShowsAnEventSourcesConsumer(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2, func(c *config.Server) { c.Test.NoEventSources = false })
	tr := waitTrigger(t, f.url, "examples", "inbox", func(tr triggerInfo) bool { return tr.State == "running" && tr.ConsumerJobID != nil })
	b.do("open the consumer task",
		chromedp.Navigate(f.url+"/tasks/examples/watch-inbox"),
		chromedp.WaitVisible(chromedp.CSS(`.status-running`)),
		pageText("events of watch-inbox start handle-event"),
		pageText("0 restarts"),
	)
	b.screenshot("event-source")
	href, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('a')].find(a => a.textContent === 'consumer job')?.getAttribute('href') || ''`))
	if err != nil {
		t.Fatal(err)
	}
	if href != "/jobs/"+*tr.ConsumerJobID {
		t.Fatalf("consumer link %q, want /jobs/%s", href, *tr.ConsumerJobID)
	}
}
