package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// countJobFetches wraps window.fetch in every page the tab opens:
// window.jobFetches counts the requests for the job detail
// /api/jobs/{id} (not its logs, steps or other routes).
const countJobFetches = `
window.jobFetches = 0;
const realFetch = window.fetch;
window.fetch = function (input, init) {
  const url = new URL(typeof input === 'string' ? input : input.url, location.href);
  if (/^\/api\/jobs\/[^/]+$/.test(url.pathname)) window.jobFetches++;
  return realFetch.call(this, input, init);
};
`

// The job page follows its job through the event stream, not by polling:
// while a step runs and nothing changes, the job detail is not fetched
// again (at most once, for the stream's start); once the step ends its
// node recolours within a moment.
func TestBrowserJobPageFollowsStepEventsWithoutPolling(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate") // outside the workspace: no reload
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`
tasks:
  held:
    flow:
      hold:
        type: script
        script: |
          while [ ! -e %q ]; do sleep 0.05; done
          echo "released"
      after:
        depends_on: [hold]
        type: script
        script: |
          while [ ! -e %q.2 ]; do sleep 0.05; done
`, gate, gate)
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"demo": dir}, 2)
	id := f.execute("demo", "held", nil)
	f.waitJob(id, "hold started", func(j jobView) bool {
		return j.step("hold").Status == "running" && j.step("hold").StartedAt != nil
	})
	b.do("count the job's fetches",
		chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: countJobFetches})
			return err
		}),
	)
	node := func(step, status string) string {
		return fmt.Sprintf(`svg.dag .node[data-step=%q][data-status=%q]`, step, status)
	}
	b.do("open the job while hold runs",
		chromedp.Navigate(f.url+"/jobs/"+id),
		chromedp.WaitVisible(chromedp.CSS(node("hold", "running"))),
		until(`window.jobFetches >= 1`),
	)

	// Nothing changes for 3 s: a poll every second would fetch the job
	// three times more; the events ask for it once at most (the refetch
	// of the stream's start, if it lands in the window).
	before := eval[int](b, `window.jobFetches`)
	window := time.Now()
	for time.Since(window) < 3*time.Second {
		b.do("watch the running time tick", until(`!!document.querySelector('svg.dag .node[data-step="hold"] .time[data-tick-from]')`))
		time.Sleep(100 * time.Millisecond) // an observation window, not a wait for state
	}
	idle := eval[int](b, `window.jobFetches`) - before
	t.Logf("job fetches: %d on opening, %d more in 3 s without changes", before, idle)
	if idle > 1 {
		t.Fatalf("the job was fetched %d times in 3 s while nothing changed: it is polled", idle)
	}

	// The step ends: its node recolours (and the next starts) soon after.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	b.do("see hold completed and after running",
		chromedp.WaitVisible(chromedp.CSS(node("hold", "completed"))),
		chromedp.WaitVisible(chromedp.CSS(node("after", "running"))),
	)
	lag := time.Since(released)
	t.Logf("hold's node recoloured %v after its gate opened", lag)
	if lag > 3*time.Second {
		t.Fatalf("hold's node took %v to recolour", lag)
	}
	if err := os.WriteFile(gate+".2", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.do("see the job completed",
		chromedp.WaitVisible(chromedp.CSS(node("after", "completed"))),
		pageText("completed"),
	)
	total := eval[int](b, `window.jobFetches`)
	t.Logf("job fetches in all: %d", total)
}
