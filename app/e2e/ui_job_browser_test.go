package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// trainWorkflow has every kind of node the job page draws: a step held
// until the test opens its gate (to watch it run), a for_each of twelve
// builds of which one fails, a failing lint with a long log, an approval,
// and a release after the approval and the builds.
const trainWorkflow = `
tasks:
  release-train:
    description: Build every target, lint, wait for a person, then release.
    folder: release
    input:
      version:
        type: string
        default: "1.4"
        description: The version to release
    flow:
      prepare:
        type: script
        script: |
          echo "preparing {{ input.version }}"
          while [ ! -e "GATE" ]; do sleep 0.05; done
          echo "prepared"
      build:
        depends_on: [prepare]
        for_each: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        type: script
        script: |
          if [ "{{ each.index }}" = "7" ]; then echo "no toolchain for target {{ each.item }}" >&2; exit 3; fi
          echo "built target {{ each.item }}"
      lint:
        depends_on: [prepare]
        type: script
        script: |
          for i in $(seq 1 30); do echo "lint line $i"; done
          echo "lint: 2 problems found"
          exit 2
      approve:
        depends_on: [prepare]
        type: approval
        message: "Release {{ input.version }}?"
      release:
        depends_on: [approve, build]
        continue_on_failure: true
        type: script
        script: echo "released {{ input.version }}"
`

// The job page against a real server and its workers: the graph matches
// the DAG and follows the job, a for_each step counts and lists its
// instances, the failure panel names what failed with its last log lines,
// an approval is approved in place, and a running step's time ticks. With
// APPLIANCE_WRITE_SCREENSHOTS=1 it also writes docs/job-light.png,
// docs/job-dark.png and docs/task.png.
func TestBrowserJobPageDrawsTheGraphAndFollowsTheJob(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate") // outside the workspace: no reload
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(trainWorkflow, `"GATE"`, fmt.Sprintf("%q", gate), 1)
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"demo": dir}, 2)
	id := f.execute("demo", "release-train", map[string]any{"version": "1.4"})
	// Its worker has reported the start: the record has its started_at.
	f.waitJob(id, "prepare started", func(j jobView) bool {
		return j.step("prepare").Status == "running" && j.step("prepare").StartedAt != nil
	})

	b.do("open the job while prepare runs",
		chromedp.Navigate(f.url+"/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="prepare"][data-status="running"]`)),
		chromedp.Poll[chromedp.Void](`!!document.querySelector('svg.dag .node[data-step="prepare"] .time[data-tick-from]')`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)

	// The graph is the DAG: one node per flow step, one edge per depends_on.
	var drawn struct {
		Nodes []string `json:"nodes"`
		Edges []string `json:"edges"`
	}
	b.eval(`({
		nodes: [...document.querySelectorAll('svg.dag .node')].map(n => n.dataset.step).sort(),
		edges: [...document.querySelectorAll('svg.dag path.edge')].map(e => e.dataset.from + '->' + e.dataset.to).sort(),
	})`, &drawn)
	if got, want := strings.Join(drawn.Nodes, ","), "approve,build,lint,prepare,release"; got != want {
		t.Errorf("graph nodes %s, want %s", got, want)
	}
	if got, want := strings.Join(drawn.Edges, ","), "approve->release,build->release,prepare->approve,prepare->build,prepare->lint"; got != want {
		t.Errorf("graph edges %s, want %s", got, want)
	}
	// Every edge starts on its source node's border and ends on its
	// target's, and runs left to right.
	var misdrawn []string
	b.eval(`[...document.querySelectorAll('svg.dag path.edge')].filter(e => {
		const box = (s) => document.querySelector('svg.dag .node[data-step="' + s + '"] rect').getBoundingClientRect();
		const from = box(e.dataset.from), to = box(e.dataset.to), m = e.getScreenCTM();
		const at = (p) => ({ x: p.x * m.a + m.e, y: p.y * m.d + m.f });
		const a = at(e.getPointAtLength(0)), z = at(e.getPointAtLength(e.getTotalLength()));
		const on = (p, r) => p.x >= r.left - 3 && p.x <= r.right + 3 && p.y >= r.top - 3 && p.y <= r.bottom + 3;
		return !(on(a, from) && on(z, to) && a.x < z.x);
	}).map(e => e.dataset.from + '->' + e.dataset.to)`, &misdrawn)
	if len(misdrawn) > 0 {
		t.Errorf("edges not drawn between their nodes: %v", misdrawn)
	}

	// A running step's time ticks in place: the same element, new text,
	// with no repaint of the graph.
	var first string
	b.eval(`(() => {
		const el = document.querySelector('svg.dag .node[data-step="prepare"] .time');
		el.dataset.mark = 'kept';
		return el.textContent;
	})()`, &first)
	b.do("watch prepare's time tick",
		chromedp.Poll[chromedp.Void](`(() => {
			const el = document.querySelector('svg.dag .node[data-step="prepare"] .time');
			return el && el.dataset.mark === 'kept' && el.textContent !== `+jsQuote(first)+` && el.textContent !== '';
		})()`, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
	// So does its bar on the timeline.
	var runMS float64
	b.eval(`Number(document.querySelector('svg.gantt .row[data-step="prepare"]').dataset.runMs)`, &runMS)
	b.do("watch prepare's bar grow", chromedp.Poll[chromedp.Void](
		`Number(document.querySelector('svg.gantt .row[data-step="prepare"]').dataset.runMs) > `+fmt.Sprint(runMS),
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(0)))

	// Colours follow the status: prepare turns from running to completed.
	const fill = `getComputedStyle(document.querySelector('svg.dag .node[data-step="prepare"] rect')).fill`
	var runningFill, doneFill string
	b.eval(fill, &runningFill)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("see prepare complete and the rest run",
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="prepare"].status-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="lint"].status-failed`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node.foreach[data-step="build"][data-total="12"][data-done="11"][data-failed="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="build"].status-failed`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="approve"][data-status="waiting"]`)),
	)
	b.eval(fill, &doneFill)
	if runningFill == doneFill {
		t.Errorf("prepare's node is filled %s both running and completed", doneFill)
	}
	var approveText, buildCounts string
	b.eval(`document.querySelector('svg.dag .node[data-step="approve"] .meta').textContent`, &approveText)
	b.eval(`document.querySelector('svg.dag .node[data-step="build"] .counts').textContent`, &buildCounts)
	if !strings.HasPrefix(approveText, "waiting for approval") || strings.Contains(approveText, "running") {
		t.Errorf("approve's node says %q, want waiting for approval", approveText)
	}
	if !strings.HasPrefix(buildCounts, "11/12 done · 1 failed") {
		t.Errorf("build's node says %q, want 11/12 done · 1 failed", buildCounts)
	}

	// The failure panel: each failed step, its error and its last 20 lines.
	j := f.job(id)
	lintErr := j.step("lint").ErrorMessage
	if lintErr == nil || *lintErr == "" {
		t.Fatalf("lint failed without an error message: %+v", j.step("lint"))
	}
	b.do("read the failure panel",
		chromedp.WaitVisible(chromedp.CSS(`#failures .failure[data-step="lint"] pre.log-tail`)),
		chromedp.WaitVisible(chromedp.CSS(`#failures .failure[data-step="build[7]"] pre.log-tail`)),
	)
	var panel struct {
		Steps []string `json:"steps"`
		Error string   `json:"error"`
		Tail  string   `json:"tail"`
		Build string   `json:"build"`
	}
	b.eval(`({
		steps: [...document.querySelectorAll('#failures .failure')].map(f => f.dataset.step),
		error: document.querySelector('#failures .failure[data-step="lint"] .error-text').textContent,
		tail: document.querySelector('#failures .failure[data-step="lint"] pre.log-tail').textContent,
		build: document.querySelector('#failures .failure[data-step="build[7]"]').innerText,
	})`, &panel)
	if want := []string{"build", "build[7]", "lint"}; !slices.Equal(sorted(panel.Steps), want) {
		t.Errorf("failure panel names %v, want %v", panel.Steps, want)
	}
	if panel.Error != *lintErr {
		t.Errorf("failure panel says lint failed with %q, the API says %q", panel.Error, *lintErr)
	}
	tail := strings.Split(panel.Tail, "\n")
	wantTail := []string{}
	for i := 12; i <= 30; i++ {
		wantTail = append(wantTail, fmt.Sprintf("lint line %d", i))
	}
	wantTail = append(wantTail, "lint: 2 problems found")
	if !slices.Equal(tail, wantTail) {
		t.Errorf("lint's last lines in the panel:\n%s\nwant lines 12 to 30 and the summary", panel.Tail)
	}
	var logged []string
	for _, l := range strings.Split(strings.TrimSpace(f.logs(id, "lint")), "\n") {
		var line struct{ Line string }
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		logged = append(logged, line.Line)
	}
	if len(logged) < 20 || !slices.Equal(tail, logged[len(logged)-20:]) {
		t.Errorf("the panel's lines are not the last 20 of lint's log %q", logged)
	}
	if !strings.Contains(panel.Build, "no toolchain for target 8") {
		t.Errorf("build[7] in the failure panel: %q", panel.Build)
	}

	// The for_each node opens a paged list of its instances.
	b.do("open build's instances",
		chromedp.Click(chromedp.CSS(`svg.dag .node.foreach[data-step="build"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.instances[data-step="build"] tbody tr`)),
	)
	b.instancePage(`1–10 of 12`, "build[0]", "build[9]", 10)
	var expanded string
	b.eval(`document.querySelector('svg.dag .node[data-step="build"]').getAttribute('aria-expanded')`, &expanded)
	if expanded != "true" {
		t.Errorf("build's node aria-expanded=%q once open", expanded)
	}
	b.do("page on", chromedp.Click(chromedp.CSS(`.instances[data-step="build"] button.next`)))
	b.instancePage(`11–12 of 12`, "build[10]", "build[11]", 2)
	b.do("page back", chromedp.Click(chromedp.CSS(`.instances[data-step="build"] button.prev`)))
	b.instancePage(`1–10 of 12`, "build[0]", "build[9]", 10)
	b.do("close it from the keyboard",
		chromedp.Focus(chromedp.CSS(`svg.dag .node.foreach[data-step="build"]`)),
		chromedp.KeyEvent("\r"),
		chromedp.Poll[chromedp.Void](`!document.querySelector('.instances[data-step="build"]')`+
			` && document.activeElement.dataset.step === 'build' && document.activeElement.getAttribute('aria-expanded') === 'false'`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`.instances[data-step="build"] tbody tr`)),
	)
	var failedRow string
	b.eval(`document.querySelector('.instances[data-step="build"] tr[data-step="build[7]"]').innerText`, &failedRow)
	if !strings.Contains(failedRow, "failed") || !strings.Contains(failedRow, "no toolchain for target 8") {
		t.Errorf("build[7]'s row: %q", failedRow)
	}

	// The timeline has a row per flow step, with the builds' queue wait.
	var rows []string
	b.eval(`[...document.querySelectorAll('svg.gantt .row')].map(r => r.dataset.step + ':' + r.dataset.status)`, &rows)
	if got := strings.Join(sorted(rows), ","); got != "approve:waiting,build:failed,lint:failed,prepare:completed,release:pending" {
		t.Errorf("timeline rows %s", got)
	}
	var waited bool
	b.eval(`document.querySelector('svg.gantt .row[data-step="lint"]').dataset.waitMs !== undefined`, &waited)
	if !waited {
		t.Error("lint's timeline row has no queue wait")
	}

	b.do("wait for the page to settle", pageText("Release 1.4?"), chromedp.WaitVisible(chromedp.CSS(`.gantt`)))
	b.docShot("job-light", `#timeline-h`)
	b.darkMode(true)
	var dark string
	b.eval(`getComputedStyle(document.body).backgroundColor`, &dark)
	if dark == "rgb(246, 247, 249)" {
		t.Errorf("the dark palette did not apply: body background %s", dark)
	}
	b.docShot("job-dark", `#timeline-h`)
	b.darkMode(false)

	// Approve in place: the job moves on to release and ends.
	b.do("approve it from the panel",
		chromedp.Click(chromedp.CSS(`#approvals .approval[data-step="approve"] button:not(.danger)`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="approve"].status-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.dag .node[data-step="release"].status-completed`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-failed`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#approvals').hidden`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
	j = f.job(id)
	out, _ := j.step("approve").Output.(map[string]any)
	if j.Status != "failed" || out["approved"] != true || j.step("release").Status != "completed" {
		t.Errorf("after approving: job %s, approve output %v, release %s", j.Status, j.step("approve").Output, j.step("release").Status)
	}
	// Once the job has ended nothing ticks: times are fixed.
	var ended string
	b.eval(`document.querySelector('svg.dag .node[data-step="release"] .time').getAttribute('data-tick-to')`, &ended)
	if ended == "" {
		t.Error("release's time has no end once the job ended")
	}

	b.do("open the task page",
		chromedp.Navigate(f.url+"/tasks/demo/release-train"),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form input[name="version"]`)),
		pageText("The version to release"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/`+id+`"]`)),
	)
	b.docShot("task", "")
}

// instancePage checks the shown page of build's instances.
func (b *browser) instancePage(rng, first, last string, n int) {
	b.t.Helper()
	b.do("show instances "+rng, chromedp.Poll[chromedp.Void](
		`document.querySelector('.instances[data-step="build"] .range')?.textContent === `+jsQuote(rng),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
	var names []string
	b.eval(`[...document.querySelectorAll('.instances[data-step="build"] tbody tr')].map(r => r.dataset.step)`, &names)
	if len(names) != n || names[0] != first || names[len(names)-1] != last {
		b.t.Errorf("instances page %s shows %v", rng, names)
	}
}

// eval runs a JavaScript expression and decodes its value into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("decode %s: %v", raw, err)
	}
}

// darkMode makes the page match prefers-color-scheme: dark, or not.
func (b *browser) darkMode(on bool) {
	b.t.Helper()
	value := "light"
	if on {
		value = "dark"
	}
	b.do("prefers-color-scheme: "+value, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: value}},
		})
		return err
	}))
}

// docShot takes a screenshot for the documentation: the page from its top
// down to the end of the section headed by `until` (the whole page when
// empty). It always checks one can be taken; it writes docs/<name>.png only
// with APPLIANCE_WRITE_SCREENSHOTS=1.
func (b *browser) docShot(name, until string) {
	b.t.Helper()
	height := 0.0
	if until != "" {
		b.eval(`(() => {
			const s = document.querySelector(`+jsQuote(until)+`).closest('section');
			return s.getBoundingClientRect().bottom + window.scrollY + 16;
		})()`, &height)
	} else {
		b.eval(`document.documentElement.scrollHeight`, &height)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.Action[[]byte](func(ctx context.Context, _ *chromedp.Target) ([]byte, error) {
		r, err := chromedp.Call(ctx, page.CaptureScreenshot, page.CaptureScreenshotParams{
			Format:                page.CaptureScreenshotFormatPng,
			Clip:                  &page.Viewport{X: 0, Y: 0, Width: 1280, Height: height, Scale: 1},
			CaptureBeyondViewport: ptrTo(true),
		})
		return r.Data, err
	}))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		b.t.Fatalf("screenshot %s is no PNG", name)
	}
	if err := os.WriteFile(filepath.Join(b.t.TempDir(), name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if os.Getenv("APPLIANCE_WRITE_SCREENSHOTS") == "1" {
		path := filepath.Join("..", "..", "docs", name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			b.t.Fatalf("write %s: %v", path, err)
		}
		b.t.Logf("wrote %s (%d bytes, %.0f px high)", path, len(png), height)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func ptrTo[T any](v T) *T { return &v }

// jsQuote is s as a JavaScript string literal.
func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
