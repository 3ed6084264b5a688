package e2e

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// queuedWorkflow is a task whose jobs run one at a time, long enough to
// keep the others in line.
const queuedWorkflow = `
tasks:
  deploy:
    input:
      priority: {type: integer, default: 0}
    concurrency: {limit: 1, priority: "{{ input.priority }}"}
    flow:
      roll-out: {type: script, script: sleep 300}
`

func TestBrowserShowsQueuedJobsAndMovesOneInLine(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	writeWorkspace(t, dir, queuedWorkflow)
	f := startFixture(t, map[string]string{"main": dir}, 2)
	first := f.execute("main", "deploy", nil)
	f.waitJob(first, "the first deploy running", func(j jobView) bool { return j.Status == "running" })
	second := f.execute("main", "deploy", nil)
	third := f.execute("main", "deploy", nil)

	b.do("see the third job's place on its page",
		chromedp.Navigate(f.url+"/jobs/"+third),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-pending`)),
		pageText("queued (2nd)"),
	)
	b.do("see the line on the Queues page and move the third job first",
		chromedp.Navigate(f.url+"/queues"),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-job-id="`+third+`"]`)),
		pageText("1 of 1 running, 2 queued"),
		chromedp.SetValue(chromedp.CSS(`tr[data-job-id="`+third+`"] input`), "10"),
		chromedp.Click(chromedp.CSS(`tr[data-job-id="`+third+`"] button[type=submit]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('#queues tbody tr')?.dataset.jobId === `+jsString(third),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
	if j := f.job(third); j.Queue == nil || j.Queue.Position != 1 || j.Queue.Priority != 10 {
		t.Fatalf("after the move the third job's queue is %+v, want first with priority 10", j.Queue)
	}
	// The running job ends: the moved one starts, and the page, following
	// job events, shows the line shorter without a reload.
	do(t, "POST", f.url+"/api/jobs/"+first+"/cancel", nil, nil)
	b.do("watch the line move",
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#queues tbody tr').length === 1 && `+
			`document.querySelector('#queues tbody tr').dataset.jobId === `+jsString(second),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
	f.waitJob(third, "the moved job running", func(j jobView) bool { return j.Status == "running" })
	for _, id := range []string{second, third} {
		do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, nil)
	}
}
