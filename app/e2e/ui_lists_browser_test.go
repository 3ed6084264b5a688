package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/appliance-sh/appliance/app/config"
)

// listsWorkflow has a task that waits for a person (its jobs stay live
// until approved through the API) and a quick one, both with display
// names and descriptions.
const listsWorkflow = `
tasks:
  gate:
    name: Release gate
    description: Holds a release until someone approves it.
    flow:
      ask:
        name: Ask the release manager
        description: Waits for an approval.
        type: approval
        message: "Go?"
  quick:
    name: Quick check
    description: Finishes at once.
    flow:
      check:
        name: Check the pages
        description: Prints a line and ends.
        type: script
        script: echo checked
`

func startListsFixture(t *testing.T) *serverFixture {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(listsWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	return startFixture(t, map[string]string{"site": dir}, 2)
}

// row is the CSS selector of a job's row in a live list.
func row(id string) string { return `tr[data-job-id="` + id + `"]` }

// The jobs page and the dashboard follow job events: a job created
// through the API appears at the top without a reload, and its status
// changes in place when it ends. A marker on window proves the page was
// never reloaded.
func TestBrowserListsShowNewJobsAndStatusChangesLive(t *testing.T) {
	b := newBrowser(t)
	f := startListsFixture(t)
	older := f.execute("site", "quick", nil)
	f.waitTerminal(older)

	b.do("open the jobs page and mark the window",
		chromedp.Navigate(f.url+"/jobs"),
		chromedp.WaitVisible(chromedp.CSS(row(older))),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = 'yes'; document.querySelector('table.jobs-table tbody').dataset.mark = 'same'`),
	)
	id := f.execute("site", "gate", nil)
	b.do("see the new job at the top, live",
		chromedp.WaitVisible(chromedp.CSS(row(id))),
		until(`document.querySelector('table.jobs-table tbody tr').dataset.jobId === `+jsonString(id)),
		pageText("1–2 of 2"),
	)
	b.screenshot("lists-jobs-live")
	f.waitJob(id, "waiting for approval", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	f.approve(id, "ask")
	b.do("see its status change in place",
		chromedp.WaitVisible(chromedp.CSS(row(id)+` .status-completed`)),
	)
	if v := eval[string](b, `window.notReloaded || 'reloaded'`); v != "yes" {
		t.Fatalf("the jobs page was reloaded (marker %q)", v)
	}
	// Not even redrawn: the rows changed in the same table body.
	if v := eval[string](b, `document.querySelector('table.jobs-table tbody').dataset.mark || 'redrawn'`); v != "same" {
		t.Fatalf("the jobs list was redrawn (marker %q)", v)
	}

	b.do("go to the dashboard (in-app)",
		chromedp.Click(chromedp.CSS(`header nav a[href="/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#recent-jobs `+row(id))),
	)
	id2 := f.execute("site", "gate", nil)
	b.do("see the new job on the dashboard, live",
		chromedp.WaitVisible(chromedp.CSS(`#recent-jobs `+row(id2))),
		until(`document.querySelector('#recent-jobs tbody tr').dataset.jobId === `+jsonString(id2)),
	)
	f.waitJob(id2, "waiting for approval", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	f.approve(id2, "ask")
	b.do("see its status change in place on the dashboard",
		chromedp.WaitVisible(chromedp.CSS(`#recent-jobs `+row(id2)+` .status-completed`)),
	)
	if v := eval[string](b, `window.notReloaded || 'reloaded'`); v != "yes" {
		t.Fatalf("the dashboard was reached by a reload (marker %q)", v)
	}
	b.screenshot("lists-dashboard-live")

	// Filtered to completed jobs, the dashboard leaves a new pending job
	// out and takes it in once it completes.
	b.do("filter the dashboard's recent jobs to completed ones",
		chromedp.SetValue(chromedp.CSS(`#recent-status`), "completed"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#recent-status').dispatchEvent(new Event('change'))`),
		until(`!document.querySelector('#recent-jobs .status-pending, #recent-jobs .status-running') && document.querySelectorAll('#recent-jobs tbody tr').length === 3`),
	)
	id3 := f.execute("site", "gate", nil)
	f.waitJob(id3, "waiting for approval", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	if eval[bool](b, `!!document.querySelector('#recent-jobs `+row(id3)+`')`) {
		t.Fatal("a running job shows among the completed ones")
	}
	f.approve(id3, "ask")
	b.do("see it join the completed jobs",
		chromedp.WaitVisible(chromedp.CSS(`#recent-jobs `+row(id3)+` .status-completed`)),
		until(`document.querySelector('#recent-jobs tbody tr').dataset.jobId === `+jsonString(id3)),
	)
	b.do("show all statuses again",
		chromedp.SetValue(chromedp.CSS(`#recent-status`), ""),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#recent-status').dispatchEvent(new Event('change'))`),
		until(`document.querySelectorAll('#recent-jobs tbody tr').length === 4`),
	)

	// Times read relative, the absolute one in datetime and on hover.
	rel := eval[[]string](b, `[...document.querySelectorAll('#recent-jobs time[data-rel]')].map(t => t.textContent + '|' + t.getAttribute('datetime') + '|' + t.title)`)
	if len(rel) != 4 {
		t.Fatalf("recent jobs' times %q, want 4", rel)
	}
	for _, r := range rel {
		parts := strings.Split(r, "|")
		if !(parts[0] == "just now" || strings.HasSuffix(parts[0], " ago")) || parts[1] == "" || parts[2] == "" {
			t.Errorf("time %q: want relative text, a datetime and an absolute title", r)
		}
	}
}

// Short ids are the random tail of the UUIDv7, so jobs created in the same
// millisecond look different; the full id is on hover, and the copy button
// (reached and pressed with the keyboard) copies it.
func TestBrowserJobIDsAreDistinctAndCopyable(t *testing.T) {
	b := newBrowser(t)
	f := startListsFixture(t)
	// Created at once, some share their millisecond (the id's first 12
	// hex digits).
	ids := make([]string, 20)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = f.execute("site", "gate", nil)
		}()
	}
	wg.Wait()
	byMilli := map[string][]string{}
	for _, id := range ids {
		byMilli[strings.ReplaceAll(id, "-", "")[:12]] = append(byMilli[strings.ReplaceAll(id, "-", "")[:12]], id)
	}
	var twins []string
	for _, same := range byMilli {
		if len(same) > 1 {
			twins = same[:2]
			break
		}
	}

	b.do("open the jobs page", chromedp.Navigate(f.url+"/jobs"), chromedp.WaitVisible(chromedp.CSS(row(ids[0]))))
	shown := eval[[]string](b, `[...document.querySelectorAll('table.jobs-table tbody tr')].map(r => r.dataset.jobId + ' ' + r.querySelector('.job-id code').textContent + ' ' + r.querySelector('.job-id code').title)`)
	seen := map[string]string{}
	for _, s := range shown {
		var id, short, title string
		fmt.Sscan(s, &id, &short, &title)
		if title != id {
			t.Errorf("job %s: hover title %q, want the full id", id, title)
		}
		if other, dup := seen[short]; dup {
			t.Errorf("jobs %s and %s both show %q", other, id, short)
		}
		seen[short] = id
	}
	if len(seen) != 20 {
		t.Fatalf("%d distinct short ids on the page, want 20: %q", len(seen), shown)
	}
	if twins == nil {
		// The scheduler spread them over milliseconds; the page check above
		// still held for these, and the rule is the id's tail either way.
		t.Logf("no two of the 20 jobs share a millisecond this run")
	} else {
		a := eval[string](b, `document.querySelector('`+row(twins[0])+` .job-id code').textContent`)
		c := eval[string](b, `document.querySelector('`+row(twins[1])+` .job-id code').textContent`)
		if a == c {
			t.Fatalf("jobs %s and %s of the same millisecond both show %q", twins[0], twins[1], a)
		}
		t.Logf("same millisecond: %s shows %s, %s shows %s", twins[0], a, twins[1], c)
	}

	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "clipboard-read"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: f.url,
	}); err != nil {
		t.Fatalf("grant clipboard-read: %v", err)
	}
	target := ids[7]
	button := row(target) + ` button.copy-id`
	if label := eval[string](b, `document.querySelector('`+button+`').getAttribute('aria-label')`); label != "Copy job id "+target {
		t.Fatalf("copy button's accessible name %q", label)
	}
	b.do("copy the id with the keyboard",
		chromedp.Focus(chromedp.CSS(button)),
		chromedp.KeyEvent("\r"),
		until(`document.querySelector('`+button+`').textContent === 'Copied'`),
	)
	copied, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || copied != target {
		t.Fatalf("the clipboard holds %q (%v), want the job id %s", copied, err, target)
	}
}

// The task page pages its jobs by cursor and filters them by status; the
// jobs page filters by status; display names and descriptions of tasks
// and steps are shown on the dashboard and the task page.
func TestBrowserTaskPageFiltersAndPagesItsJobs(t *testing.T) {
	b := newBrowser(t)
	f := startListsFixture(t)
	var done []string
	for range 12 {
		done = append(done, f.execute("site", "quick", nil))
	}
	for _, id := range done {
		f.waitTerminal(id)
	}
	live := f.execute("site", "gate", nil)
	finished := f.execute("site", "gate", nil)
	f.waitJob(finished, "waiting for approval", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	f.approve(finished, "ask")
	f.waitTerminal(finished)

	b.do("see display names and descriptions on the dashboard",
		chromedp.Navigate(f.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/site/quick"]`)),
		pageText("Quick check"),
		pageText("Finishes at once."),
		pageText("Release gate"),
		pageText("Holds a release until someone approves it."),
	)
	b.do("open the quick task: its name, description and steps",
		chromedp.Click(chromedp.CSS(`a[href="/tasks/site/quick"]`)),
		until(`document.querySelector('main h1').textContent.startsWith('Quick check')`),
		pageText("Check the pages"),
		pageText("Prints a line and ends."),
		pageText("1–10 of 12"),
	)
	first := eval[[]string](b, `[...document.querySelectorAll('table.jobs-table tbody tr')].map(r => r.dataset.jobId)`)
	b.do("page to the older jobs",
		chromedp.Click(chromedp.CSS(`nav.pager a`)),
		pageText("11–12 of 12"),
	)
	second := eval[[]string](b, `[...document.querySelectorAll('table.jobs-table tbody tr')].map(r => r.dataset.jobId)`)
	if len(first) != 10 || len(second) != 2 {
		t.Fatalf("pages of %d and %d jobs, want 10 and 2", len(first), len(second))
	}
	all := strings.Join(append(first, second...), " ")
	for _, id := range done {
		if strings.Count(all, id) != 1 {
			t.Errorf("job %s shows %d times over the two pages", id, strings.Count(all, id))
		}
	}
	b.do("page back",
		chromedp.Click(chromedp.CSS(`nav.pager a`)),
		pageText("1–10 of 12"),
	)

	b.do("filter the gate task's jobs by status",
		chromedp.Navigate(f.url+"/tasks/site/gate"),
		pageText("Release gate"),
		pageText("Ask the release manager"),
		pageText("1–2 of 2"),
		chromedp.SetValue(chromedp.CSS(`#task-status`), "completed"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#task-status').dispatchEvent(new Event('change'))`),
		pageText("1–1 of 1"),
		chromedp.WaitVisible(chromedp.CSS(row(finished))),
	)
	if n := eval[int](b, `document.querySelectorAll('table.jobs-table tbody tr').length`); n != 1 {
		t.Fatalf("%d rows with status completed, want 1", n)
	}
	b.screenshot("lists-task-filtered")

	b.do("filter the jobs page by status",
		chromedp.Click(chromedp.CSS(`header nav a[href="/jobs"]`)),
		pageText("1–14 of 14"),
		chromedp.SetValue(chromedp.CSS(`#filter-status`), "pending,running"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#filter-status').dispatchEvent(new Event('change'))`),
		pageText("1–1 of 1"),
		chromedp.WaitVisible(chromedp.CSS(row(live))),
	)
}

// When the connection under the event stream drops, the page reconnects
// (with its renewed token, auth being on), reloads its list in place (no
// page load) and goes on showing new jobs live. The browser reaches the
// server through a proxy that cuts its connections: the stream itself
// outlives the access token it was opened with.
func TestBrowserListsReconnectWhenTheStreamDrops(t *testing.T) {
	b := newBrowser(t)
	s := startAuthServer(t, func(c *config.Server) { c.Auth.AccessTokenTTL = "3s" })
	proxy := startCutProxy(t, strings.TrimPrefix(s.url, "http://"))
	b.do("sign in and open the jobs page",
		chromedp.Navigate(proxy.url+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
		chromedp.SetValue(chromedp.CSS(`#login-email`), "admin@example.com"),
		chromedp.SetValue(chromedp.CSS(`#login-password`), "first-password"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#user-menu summary`)),
		chromedp.Click(chromedp.CSS(`header nav a[href="/jobs"]`)),
		pageText("No jobs match."),
		chromedp.Evaluate[chromedp.Void](`window.notReloaded = 'yes'; document.querySelector('table.jobs-table tbody').dataset.mark = 'first'`),
	)
	proxy.cut()
	b.do("see the list reloaded in place after the stream dropped and came back",
		until(`!document.querySelector('table.jobs-table tbody[data-mark]')`),
	)
	if v := eval[string](b, `window.notReloaded || 'reloaded'`); v != "yes" {
		t.Fatalf("the page was reloaded (marker %q)", v)
	}
	token := loginToken(t, s.url, "first-password")
	var out struct {
		JobID string `json:"job_id"`
	}
	if code := doAuthBody(t, "POST", s.url+"/api/workspaces/main/tasks/hello/execute", token, map[string]any{"input": map[string]any{}}, &out); code != 200 {
		t.Fatalf("execute: %d", code)
	}
	b.do("see a job created after the reconnect, live",
		chromedp.WaitVisible(chromedp.CSS(row(out.JobID))),
		chromedp.WaitVisible(chromedp.CSS(row(out.JobID)+` .status-completed`)),
	)
	if v := eval[string](b, `window.notReloaded || 'reloaded'`); v != "yes" {
		t.Fatalf("the page was reloaded (marker %q)", v)
	}
}
