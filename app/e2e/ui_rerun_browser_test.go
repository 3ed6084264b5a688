package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// currentJobID is the job id in the tab's URL.
func currentJobID(b *browser) string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname`))
	if err != nil {
		b.t.Fatal(err)
	}
	return strings.TrimPrefix(loc, "/jobs/")
}

func TestBrowserRerunsAFailedJobFromItsFailedStepsAndAWholeJob(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	old := f.execute("examples", "pipeline", map[string]any{"fail_tests": true})
	if j := f.waitTerminal(old); j.Status != "failed" {
		t.Fatalf("pipeline is %s, want failed", j.Status)
	}

	b.do("re-run the failed steps from the job's page",
		chromedp.Navigate(f.url+"/jobs/"+old),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-failed`)),
		chromedp.WaitVisible(chromedp.CSS(`#rerun`)),
		chromedp.Click(chromedp.CSS(`#rerun-failed`)),
		chromedp.Poll[chromedp.Void](`location.pathname !== '/jobs/`+old+`'`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
		chromedp.WaitVisible(chromedp.CSS(`#rerun-of a[href="/jobs/`+old+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="lint"] .reused`)),
	)
	b.screenshot("rerun-failed")
	id := currentJobID(b)
	j := f.job(id)
	if j.RerunOf != old || j.step("lint").ReusedFrom != old || j.step("unit-tests").ReusedFrom != "" {
		t.Fatalf("the new job %s: rerun_of %q, lint reused from %q, unit-tests reused from %q", id, j.RerunOf, j.step("lint").ReusedFrom, j.step("unit-tests").ReusedFrom)
	}
	reused, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('table.steps tbody tr')].filter(r => r.querySelector('.reused')).map(r => r.dataset.step)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(reused, ",") != "lint" {
		t.Errorf("rows marked reused: %v, want only lint", reused)
	}

	// A completed job offers only the whole re-run.
	done := f.execute("examples", "hello-world", map[string]any{"name": "Ada"})
	f.waitTerminal(done)
	b.do("re-run a completed job",
		chromedp.Navigate(f.url+"/jobs/"+done),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
		chromedp.Poll[chromedp.Void](`!document.querySelector('#rerun-failed')`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
		chromedp.Click(chromedp.CSS(`#rerun`)),
		chromedp.WaitVisible(chromedp.CSS(`#rerun-of a[href="/jobs/`+done+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
	)
	if j := f.job(currentJobID(b)); j.RerunOf != done || j.Input["name"] != "Ada" {
		t.Errorf("whole re-run: rerun_of %q input %v", j.RerunOf, j.Input)
	}
}
