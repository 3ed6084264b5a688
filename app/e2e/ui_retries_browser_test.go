package e2e

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserJobPageShowsRetries opens the page of a job whose step waits
// to be retried (it shows when) and of one whose step runs its second
// attempt (it shows which).
func TestBrowserJobPageShowsRetries(t *testing.T) {
	b := newBrowser(t)
	dir := t.TempDir()
	mark := filepath.Join(t.TempDir(), "failed-once")
	writeWorkspace(t, dir, fmt.Sprintf(`tasks:
  waits:
    flow:
      try: {type: script, script: "exit 3", retries: 1, retry_delay: 5m}
  second:
    flow:
      try:
        type: script
        retries: 1
        retry_delay: 1s
        script: |
          if [ -f %q ]; then sleep 60; else touch %q; exit 3; fi
`, mark, mark))
	f := startFixture(t, map[string]string{"ws": dir}, 2)

	waiting := f.execute("ws", "waits", nil)
	f.waitJob(waiting, "the step to wait for its retry", func(j jobView) bool { return j.step("try").RetryAt != nil })
	b.do("see when the step is retried",
		chromedp.Navigate(f.url+"/jobs/"+waiting),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="try"] .retry-at`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="try"] .error-text`)),
	)
	b.screenshot("retry-waiting")

	second := f.execute("ws", "second", nil)
	f.waitJob(second, "the second attempt to run", func(j jobView) bool {
		return j.step("try").Attempt == 2 && j.step("try").Status == "running"
	})
	b.do("see the attempt number",
		chromedp.Navigate(f.url+"/jobs/"+second),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="try"] .attempt`)),
		pageText("attempt 2"),
	)
	b.screenshot("retry-second-attempt")
	for _, id := range []string{waiting, second} {
		if code, out, errOut := f.client("cancel", id); code != 0 {
			t.Errorf("cancel %s: exit %d %s %s", id, code, out, errOut)
		}
	}
}
