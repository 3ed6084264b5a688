package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// logWorkflow prints coloured lines, markup that must stay text, stderr
// lines and a word to search for, in two steps.
const logWorkflow = `tasks:
  noisy:
    flow:
      colour:
        type: script
        script: |
          printf '\033[31mred text\033[0m then plain\n'
          printf '\033[1;32mbold green\033[0m\n'
          echo '<script>window.pwned = 1</script>'
          echo '<img src=x onerror="window.pwned = 2">'
          echo 'a needle in colour'
          echo 'colour complains' >&2
      other:
        depends_on: [colour]
        type: script
        script: |
          echo 'other says hello'
          echo 'another needle here'
          echo 'other complains' >&2
`

func poll(js string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// selectValue picks a <select>'s option as a user would: value, then change.
func selectValue(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector(` + jsQuote(sel) + `); s.value = ` + jsQuote(value) + `; s.dispatchEvent(new Event('change')); })()`)
}

// logText is the visible text of the log's rows, one per line.
const logText = `[...document.querySelectorAll('.log .line .text')].map((e) => e.textContent).join('\n')`

func TestBrowserLogFiltersSearchesDownloadsAndShowsColoursAsText(t *testing.T) {
	b := newBrowser(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, logWorkflow)
	f := startFixture(t, map[string]string{"main": ws}, 1)
	id := f.execute("main", "noisy", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %s", id, j.Status)
	}

	b.do("open the job and see its coloured log",
		chromedp.Navigate(f.url+"/jobs/"+id),
		poll(`document.querySelector('.log')?.innerText.includes('other complains')`),
	)
	var ansi struct {
		Red, Bold     string
		BoldWeight    string
		RedColour     string
		Markup        int
		ScriptText    bool
		ImgText       bool
		Pwned         bool
		PlainAfterRed string
	}
	b.eval(`(() => {
		const red = document.querySelector('.log .line .text span.ansi-red-fg');
		const bold = document.querySelector('.log .line .text span.ansi-green-fg.ansi-bold');
		const text = document.querySelector('.log')?.innerText;
		return {
			red: red?.textContent, bold: bold?.textContent,
			boldWeight: bold ? getComputedStyle(bold).fontWeight : '',
			redColour: red ? getComputedStyle(red).color : '',
			markup: document.querySelectorAll('.log script, .log img').length,
			scriptText: text.includes('<script>window.pwned = 1</script>'),
			imgText: text.includes('<img src=x onerror="window.pwned = 2">'),
			pwned: window.pwned !== undefined,
			plainAfterRed: red?.nextSibling?.textContent,
		};
	})()`, &ansi)
	if ansi.Red != "red text" || ansi.Bold != "bold green" || ansi.BoldWeight != "700" || ansi.RedColour != "rgb(248, 113, 113)" || ansi.PlainAfterRed != " then plain" {
		t.Errorf("ANSI colours: %+v", ansi)
	}
	if ansi.Markup != 0 || !ansi.ScriptText || !ansi.ImgText || ansi.Pwned {
		t.Errorf("markup in a log line must show as text: %+v", ansi)
	}
	if s := eval[string](b, logText); strings.Contains(s, "\x1b") || strings.Contains(s, "[31m") {
		t.Errorf("escape codes shown: %q", s)
	}

	b.do("show one step",
		selectValue(`#log-step`, "other"),
		poll(`!document.querySelector('.log')?.innerText.includes('red text') && document.querySelector('.log')?.innerText.includes('other says hello')`),
	)
	b.do("show its stderr only",
		selectValue(`#log-stream`, "stderr"),
		poll(`document.querySelectorAll('.log .line').length === 1 && document.querySelector('.log .line.stderr')?.innerText.includes('other complains')`),
	)
	b.do("every step's stderr",
		selectValue(`#log-step`, ""),
		poll(`document.querySelectorAll('.log .line').length === 2 && document.querySelectorAll('.log .line.stderr').length === 2`),
		selectValue(`#log-stream`, ""),
		poll(`document.querySelector('.log')?.innerText.includes('red text')`),
	)

	b.do("search for needle",
		chromedp.SendKeys(chromedp.CSS(`#log-search`), "NEEDLE"),
		poll(`document.querySelector('.log-hits').textContent === '2 matching lines'`+
			` && [...document.querySelectorAll('.log mark')].map((m) => m.textContent).join() === 'needle,needle'`),
		chromedp.SendKeys(chromedp.CSS(`#log-search`), "\r"),
		poll(`document.querySelector('.log-hits').textContent === '1 of 2'`+
			` && document.querySelector('.log .line.current')?.innerText.includes('a needle in colour')`),
		chromedp.Click(chromedp.CSS(`button[aria-label="Next match"]`)),
		poll(`document.querySelector('.log-hits').textContent === '2 of 2'`+
			` && document.querySelector('.log .line.current')?.innerText.includes('another needle here')`),
	)
	b.screenshot("log-search")

	downloads := b.allowDownloads()
	b.do("download the whole log as text", chromedp.Click(chromedp.CSS(`#log-download-text`)))
	text := downloads.wait("job-" + id + ".log")
	for _, want := range []string{"[colour] red text then plain\n", "[colour] <script>window.pwned = 1</script>\n", "[other] other complains\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text download lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\x1b") {
		t.Errorf("text download keeps escape codes:\n%q", text)
	}

	b.do("download one step's stdout as JSONL",
		selectValue(`#log-step`, "colour"),
		selectValue(`#log-stream`, "stdout"),
		// The rows and the search's count are redrawn first: a click
		// aimed before the toolbar settles can miss the button.
		poll(`document.querySelectorAll('.log .line').length === 5 && document.querySelector('.log-hits').textContent === '1 matching line'`),
		chromedp.Click(chromedp.CSS(`#log-download-jsonl`)),
	)
	jsonl := downloads.wait("job-" + id + "-colour-stdout.jsonl")
	var got []string
	for _, raw := range strings.Split(strings.TrimSuffix(jsonl, "\n"), "\n") {
		var l struct{ Step, Stream, Line string }
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("JSONL line %q: %v", raw, err)
		}
		if l.Step != "colour" || l.Stream != "stdout" {
			t.Errorf("JSONL line of step %q stream %q", l.Step, l.Stream)
		}
		got = append(got, l.Line)
	}
	want := []string{"\x1b[31mred text\x1b[0m then plain", "\x1b[1;32mbold green\x1b[0m", "<script>window.pwned = 1</script>", `<img src=x onerror="window.pwned = 2">`, "a needle in colour"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("JSONL lines %q, want %q", got, want)
	}
}

// downloadWatch follows the tab's downloads through Chromium's own
// events, so a test reads a file only once Chromium says it is complete.
type downloadWatch struct {
	t    testing.TB
	dir  string
	mu   sync.Mutex
	name map[string]string // suggested file name by download GUID
	seen []string          // what happened, for the failure message
	done map[string]bool   // the names of completed downloads
}

// allowDownloads saves the tab's downloads in a folder the test reads.
func (b *browser) allowDownloads() *downloadWatch {
	w := &downloadWatch{t: b.t, dir: b.t.TempDir(), name: map[string]string{}, done: map[string]bool{}}
	// The command goes to the tab's session, which then gets the events.
	err := chromedp.Listen(b.ctx, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch ev := ev.(type) {
		case *cdpbrowser.EventDownloadWillBegin:
			w.name[ev.GUID] = ev.SuggestedFilename
			w.seen = append(w.seen, "began "+ev.SuggestedFilename)
		case *cdpbrowser.EventDownloadProgress:
			if ev.State != cdpbrowser.DownloadProgressStateInProgress {
				w.seen = append(w.seen, fmt.Sprintf("%s %s", w.name[ev.GUID], ev.State))
			}
			if ev.State == cdpbrowser.DownloadProgressStateCompleted {
				w.done[w.name[ev.GUID]] = true
			}
		}
	})
	if err != nil {
		b.t.Fatalf("watch downloads: %v", err)
	}
	b.do("allow downloads", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: w.dir, EventsEnabled: new(true),
		})
		return err
	}))
	return w
}

// wait returns the text of the download named name once it completed.
func (w *downloadWatch) wait(name string) string {
	w.t.Helper()
	waitFor(w.t, "download "+name, func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		return fmt.Sprintf("downloads: %q", w.seen)
	}, func(string) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.done[name]
	})
	body, err := os.ReadFile(filepath.Join(w.dir, name))
	if err != nil {
		w.t.Fatalf("download %s: %v", name, err)
	}
	return string(body)
}

// TestBrowserLogFollowPausesWhenScrolledUp follows a job printing lines:
// the view keeps to the end, stops when the user scrolls up, and catches up
// when asked.
func TestBrowserLogFollowPausesWhenScrolledUp(t *testing.T) {
	b := newBrowser(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  ticks:\n    flow:\n      tick:\n        type: script\n        script: |\n          for i in $(seq 1 600); do echo \"tick $i\"; sleep 0.05; done\n")
	f := startFixture(t, map[string]string{"main": ws}, 1)
	id := f.execute("main", "ticks", nil)
	t.Cleanup(func() { tryDo("POST", f.url+"/api/jobs/"+id+"/cancel", "", nil) })

	// The last row drawn shows the log's last line, in sight.
	const atEnd = `(() => { const o = document.querySelector('.log'); return o.scrollTop + o.clientHeight >= o.scrollHeight - 2; })()`
	const lastTick = `Number((document.querySelector('.log .line:last-child .text')?.textContent || 'tick 0').split(' ')[1])`
	b.do("follow the live log",
		chromedp.Navigate(f.url+"/jobs/"+id),
		poll(lastTick+` > 40 && `+atEnd),
		poll(`!document.querySelector('.log-resume')?.checkVisibility()`),
	)
	b.do("scroll up",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('.log').scrollTop = 0`),
		poll(`!!document.querySelector('.log-resume')?.checkVisibility()`),
	)
	seen := eval[int](b, lastTick)
	// New lines come in without moving the view.
	b.do("lines keep coming while paused",
		poll(`document.querySelector('.log-sizer').offsetHeight / document.querySelector('.log .line').offsetHeight > `+strconv.Itoa(seen+20)),
	)
	if top := eval[float64](b, `document.querySelector('.log').scrollTop`); top != 0 {
		t.Errorf("the paused view moved to %v", top)
	}
	if first := eval[string](b, `document.querySelector('.log .line .text').textContent`); first != "tick 1" {
		t.Errorf("the paused view shows %q first", first)
	}
	b.do("resume following",
		chromedp.Click(chromedp.CSS(`.log-resume`)),
		poll(atEnd+` && !document.querySelector('.log-resume')?.checkVisibility()`),
	)
	if now := eval[int](b, lastTick); now <= seen+20 {
		t.Errorf("after resuming the view shows tick %d, before pausing %d", now, seen)
	}
	b.do("follow on", poll(lastTick+` > `+strconv.Itoa(seen+40)+` && `+atEnd))
}

// TestBrowserBigLogKeepsTheDOMSmallAndThePageResponsive opens the log of a
// step that printed 200,000 lines: the page answers while it loads, only
// the rows in sight are in the DOM, and every line can be reached.
func TestBrowserBigLogKeepsTheDOMSmallAndThePageResponsive(t *testing.T) {
	// APPLIANCE_BIG_LOG_LINES=1000000 makes a log of about 100 MB.
	n := 200000
	if v := os.Getenv("APPLIANCE_BIG_LOG_LINES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 200000 {
			t.Fatalf("APPLIANCE_BIG_LOG_LINES=%q: want a number of lines of at least 200000", v)
		}
	}
	b := newBrowser(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  count:\n    flow:\n      count:\n        type: script\n        script: seq 1 "+strconv.Itoa(n)+"\n")
	f := startFixture(t, map[string]string{"main": ws}, 1)
	id := f.execute("main", "count", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %s", id, j.Status)
	}
	if err := chromedp.Do(b.ctx, chromedp.Navigate(f.url+"/jobs/"+id)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	maxRows, slowest, polls, tailShown := 0, time.Duration(0), 0, 0
	var state string
	for {
		// Each probe must come back fast: a tab busy parsing would not answer.
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
		var probe struct {
			Rows  int    `json:"rows"`
			State string `json:"state"`
			Last  string `json:"last"`
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](`({rows: document.querySelectorAll('.log .line').length,
			state: document.querySelector('.log-state')?.textContent || '',
			last: document.querySelector('.log .line:last-child .text')?.textContent || ''})`))
		cancel()
		if err != nil {
			t.Fatalf("the page did not answer within 2 s after %v of loading (%d answers before): %v", time.Since(start), polls, err)
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			t.Fatal(err)
		}
		polls++
		slowest = max(slowest, time.Since(t0))
		maxRows = max(maxRows, probe.Rows)
		state = probe.State
		// While the whole log loads, its last lines are on show already.
		if strings.HasPrefix(state, "loading…") && probe.Rows > 0 {
			tailShown++
			if probe.Last != strconv.Itoa(n) {
				t.Errorf("while loading the view ends with %q, not the log's last line", probe.Last)
			}
		}
		if strings.HasPrefix(state, "complete") {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("the log did not load in 60 s: %q", state)
		}
		time.Sleep(20 * time.Millisecond) // pacing the probes, not waiting for a state
	}
	var size struct {
		Logs string `json:"logs"`
	}
	do(t, "GET", f.url+"/api/jobs/"+id+"/logs", nil, &size)
	t.Logf("%d lines (%.1f MB of JSONL) loaded in %v; %d probes, slowest answer %v; at most %d rows in the DOM",
		n, float64(len(size.Logs))/1e6, time.Since(start), polls, slowest, maxRows)
	if want := "complete · " + thousands(n) + " lines"; state != want {
		t.Errorf("state %q, want %q", state, want)
	}
	if tailShown == 0 {
		t.Error("no probe saw the log's end while the rest loaded")
	}
	if maxRows == 0 || maxRows > 150 {
		t.Errorf("the DOM held up to %d rows", maxRows)
	}
	if last := eval[string](b, `document.querySelector('.log .line:last-child .text').textContent`); last != strconv.Itoa(n) {
		t.Errorf("the followed view ends with %q", last)
	}
	b.do("scroll to the top and the middle",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('.log').scrollTop = 0`),
		poll(`document.querySelector('.log .line .text').textContent === '1'`),
		chromedp.Evaluate[chromedp.Void](`(() => { const o = document.querySelector('.log'); o.scrollTop = (o.scrollHeight - o.clientHeight) / 2; })()`),
		poll(`(() => { const v = Number(document.querySelector('.log .line .text').textContent); return v > `+strconv.Itoa(n*45/100)+` && v < `+strconv.Itoa(n*55/100)+` && document.querySelectorAll('.log .line').length < 150; })()`),
	)
	b.do("search the whole log",
		chromedp.SendKeys(chromedp.CSS(`#log-search`), "199999\r"),
		poll(`document.querySelector('.log-hits').textContent === '1 of 1' && document.querySelector('.log .line.current mark')?.textContent === '199999'`),
	)
}

// thousands writes n as en-US does: 200,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
