package app

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestJobPageShowsTheLogTailThenTheWholeLogOnRequest opens a job whose
// log is longer than the page's first view: it shows the last lines and
// says so, and loads everything when asked.
func TestJobPageShowsTheLogTailThenTheWholeLogOnRequest(t *testing.T) {
	b := newBrowser(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  count:\n    flow:\n      count:\n        type: script\n        script: seq 1 3000\n")
	f := startFixture(t, map[string]string{"main": ws}, 1)
	id := f.execute("main", "count", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %s", id, j.Status)
	}
	var all struct {
		Lines int `json:"lines"`
	}
	do(t, "GET", f.url+"/api/jobs/"+id+"/logs", nil, &all)

	poll := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
	}
	b.do("open the job and see its last 1000 lines",
		chromedp.Navigate(f.url+"/jobs/"+id),
		poll(`document.querySelectorAll('.log .line').length === 1000`+
			` && document.querySelector('.log-cut').innerText.includes('Showing the last 1000 lines')`+
			` && document.querySelector('.log').innerText.includes('3000')`),
	)
	b.do("load the whole log",
		chromedp.Click(chromedp.CSS(`.log-cut button`)),
		poll(`document.querySelectorAll('.log .line').length === `+strconv.Itoa(all.Lines)+
			` && document.querySelector('.log-cut').innerText === ''`),
	)
}
