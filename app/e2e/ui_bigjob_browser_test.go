package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const fanWorkflow = `
actions:
  ok: {type: script, script: "true"}
tasks:
  fan:
    input:
      n: {type: integer, required: true}
    flow:
      fan:
        action: ok
        for_each: "{{ range(input.n) | list }}"
`

// bigJob serves a job of 10,000 for_each instances (no worker: they stay
// ready) beside a cancelled job of one.
func bigJob(tb testing.TB) (f *serverFixture, id string) {
	dir := tb.TempDir()
	writeFile(tb, filepath.Join(dir, ".workflows", "main.yaml"), fanWorkflow)
	f = startFixture(tb, map[string]string{"big": dir}, 0)
	id = f.execute("big", "fan", map[string]any{"n": 10000})
	f.waitJob(id, "10,000 ready instances", func(j jobView) bool { return j.StepsSummary["ready"] == 10000 })
	other := f.execute("big", "fan", map[string]any{"n": 1})
	do(tb, "POST", f.url+"/api/jobs/"+other+"/cancel", nil, nil)
	return f, id
}

// openBigJob opens the big job's page until its first 200 steps show.
func openBigJob(b *browser, url string) {
	b.do("open the big job",
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#steps-summary`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#all-steps tbody tr').length === 200`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)),
	)
}

// TestBrowserOpensA10000InstanceJob opens the page of a job of 10,000
// for_each instances: the detail lists the flow step, the summary counts
// every instance, and the "All steps" section pages them 200 at a time,
// filtered by status. Then the jobs list filters by status. How quickly
// the page opens is BenchmarkBrowserOpensA10000InstanceJob's to say.
func TestBrowserOpensA10000InstanceJob(t *testing.T) {
	b := newBrowser(t)
	f, id := bigJob(t)
	openBigJob(b, f.url+"/jobs/"+id)
	b.screenshot("big-job")
	summary, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#steps-summary').innerText`))
	if err != nil || !strings.Contains(summary, "ready 10000") || !strings.Contains(summary, "running 1") {
		t.Errorf("summary %q, %v", summary, err)
	}
	b.do("page on and filter",
		chromedp.Click(chromedp.CSS(`#steps-more`)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll('#all-steps tbody tr').length === 400`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)),
		pageText("400 of 10001"),
		// The filter changes twice at once (a quick second choice): the
		// first list's page, answered after the second list began, must
		// not be appended to it ("fan" twice, "2 of 1").
		chromedp.Evaluate[chromedp.Void](`(() => {
			const s = document.querySelector('#steps-status');
			s.value = 'running';
			s.dispatchEvent(new Event('change'));
			s.dispatchEvent(new Event('change'));
		})()`),
		// Both pages are in, and two frames later painted...
		chromedp.Poll[chromedp.Void](`performance.getEntriesByType('resource').filter(e => e.name.includes('/steps?') && e.name.includes('status=running')).length === 2`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)),
		chromedp.Evaluate[chromedp.Void](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))`, chromedp.EvalAwaitPromise),
		// ...and only the running for_each parent is listed, once.
		chromedp.Poll[chromedp.Void](`[...document.querySelectorAll('#all-steps tbody tr')].map(r => r.dataset.step).join(',') === 'fan'`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(0)),
		pageText("1 of 1"),
	)
	if rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#all-steps tbody tr')].map(r => r.dataset.step).join(',') + ' / ' + document.querySelector('#all-steps .count').textContent`)); err != nil || rows != "fan / 1 of 1" {
		t.Errorf("steps listed after filtering twice: %q, %v; want %q", rows, err, "fan / 1 of 1")
	}

	b.do("filter the jobs list by status",
		chromedp.Navigate(f.url+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(`#filter-status`)),
		pageText("1–2 of 2"),
		chromedp.SetValue(chromedp.CSS(`#filter-status`), "cancelled"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#filter-status').dispatchEvent(new Event('change'))`),
		pageText("1–1 of 1"),
	)
	if href, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.search`)); err != nil || href != "?status=cancelled" {
		t.Errorf("URL query %q, %v", href, err)
	}
}

// BenchmarkBrowserOpensA10000InstanceJob opens the page of a job of
// 10,000 instances in headless Chromium until its first 200 steps show;
// reports the time an open takes.
func BenchmarkBrowserOpensA10000InstanceJob(b *testing.B) {
	br := newBrowser(b)
	f, id := bigJob(b)
	for b.Loop() {
		openBigJob(br, f.url+"/jobs/"+id)
		br.do("leave the page", chromedp.Navigate("about:blank")) // the next open loads it afresh
	}
}
