package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/appliance-sh/appliance/app/config"
)

// stderrLeakWorkspace has a task whose step prints every kind of secret on
// stderr and fails, and an on_error hook that hands the failure on. %[1]s
// is the actions' tags line (empty for in-process workers).
const stderrLeakWorkspace = secretSources + `actions:
  report:
    type: script
    %[1]s
    input:
      message: {type: text}
      first: {type: text}
    script: |
      echo "report: {{ input.message }} / {{ input.first }}"
tasks:
  leaky:
    input:
      pin: {type: string, secret: true}
      target: {type: db}
    flow:
      talk:
        type: script
        %[1]s
        script: |
          echo "pin={{ input.pin }} pw={{ input.target.password }} token={{ secret.API_TOKEN }}" >&2
          exit 1
    on_error:
      - action: report
        input:
          message: "{{ hook.error_message }}"
          first: "{{ hook.failed_steps[0].error_message }}"
`

// leakedSecrets are the values stderrLeakWorkspace's job must never show:
// a secret input, a connection's secret property, a workspace secret.
var leakedSecrets = []string{"pin-98765", "hunter2-pw", "tok-1234567"}

// maskedStderr is the failing step's error_message once masked.
const maskedStderr = "Exit code: 1\npin=*** pw=*** token=***"

// runStderrLeak starts a server (in-process workers, or a remote worker)
// on stderrLeakWorkspace, runs the leaky task to its failure and its hook
// job to its end, and returns both job ids.
func runStderrLeak(t *testing.T, remote bool) (f *serverFixture, jobID, hookID string) {
	t.Helper()
	t.Setenv("APPLIANCE_TEST_API_TOKEN", "tok-1234567")
	dir := t.TempDir()
	if remote {
		writeWorkspace(t, dir, fmt.Sprintf(stderrLeakWorkspace, "tags: [remote]"))
		f = startFixture(t, map[string]string{"ws": dir}, 0, func(c *config.Server) { c.WorkerToken = "worker-secret" })
		startRemoteWorker(t, f.url, "worker-secret", "tags: [remote]\n")
	} else {
		writeWorkspace(t, dir, fmt.Sprintf(stderrLeakWorkspace, ""))
		f = startFixture(t, map[string]string{"ws": dir}, 1)
	}
	jobID = f.execute("ws", "leaky", map[string]any{"pin": "pin-98765", "target": "prod"})
	if j := f.waitTerminal(jobID); j.Status != "failed" {
		t.Fatalf("leaky job %s, want failed", j.Status)
	}
	hook := waitFor(t, "the on_error hook job", func() jobItemView {
		var list struct {
			Items []jobItemView `json:"items"`
		}
		do(t, "GET", f.url+"/api/jobs", nil, &list)
		for _, j := range list.Items {
			if j.SourceType == "hook" && j.SourceID != nil && *j.SourceID == jobID {
				return j
			}
		}
		return jobItemView{}
	}, func(j jobItemView) bool { return j.JobID != "" })
	if h := f.waitTerminal(hook.JobID); h.Status != "completed" {
		t.Fatalf("hook job %s, want completed", h.Status)
	}
	return f, jobID, hook.JobID
}

type jobItemView struct {
	JobID      string  `json:"job_id"`
	SourceType string  `json:"source_type"`
	SourceID   *string `json:"source_id"`
}

// rawGet returns the body of a GET as text, failing the test on a non-200.
func rawGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := testClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// noSecretIn fails the test if text shows any of the leaked secrets.
func noSecretIn(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range leakedSecrets {
		if strings.Contains(text, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, text)
		}
	}
}

func TestSecretsOnStderrReachNoErrorMessageHookOrJobDetail(t *testing.T) {
	for _, transport := range []string{"in-process", "remote"} {
		t.Run(transport, func(t *testing.T) {
			f, id, hookID := runStderrLeak(t, transport == "remote")

			// The job detail, as the API and the UI get it.
			j := f.job(id)
			if msg := j.step("talk").ErrorMessage; msg == nil || *msg != maskedStderr {
				t.Errorf("error_message %q, want %q", deref(msg), maskedStderr)
			}
			noSecretIn(t, "the job detail", rawGet(t, f.url+"/api/jobs/"+id))

			// The step record itself, as stored (and shown on its worker's page).
			_, steps, err := f.srv.engine.Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range steps {
				if s.Name == "talk" && (s.ErrorMessage == nil || *s.ErrorMessage != maskedStderr) {
					t.Errorf("stored error_message %q, want %q", deref(s.ErrorMessage), maskedStderr)
				}
			}
			if w := j.step("talk").WorkerID; w != nil {
				noSecretIn(t, "the worker detail", rawGet(t, f.url+"/api/workers/"+*w))
			}

			// The hook job got the masked context as its input, as stored.
			hj, _, err := f.srv.engine.Job(context.Background(), hookID)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := hj.Input["message"], "talk: "+maskedStderr; got != want {
				t.Errorf("hook job input message %q, want %q", got, want)
			}
			if got := hj.Input["first"]; got != maskedStderr {
				t.Errorf("hook job input first %q, want %q", got, maskedStderr)
			}
			noSecretIn(t, "the hook job detail", rawGet(t, f.url+"/api/jobs/"+hookID))
			logs := f.logs(hookID, "")
			if !strings.Contains(logs, "report: talk: Exit code: 1") || !strings.Contains(logs, "pin=*** pw=*** token=***") {
				t.Errorf("hook job log lacks the masked report:\n%s", logs)
			}
			noSecretIn(t, "the hook job's log", logs)
			noSecretIn(t, "the job's log", f.logs(id, ""))
		})
	}
}

func TestBrowserJobPagesShowNoSecretFromStderr(t *testing.T) {
	b := newBrowser(t)
	f, id, hookID := runStderrLeak(t, false)
	for _, page := range []struct{ name, id, status string }{{"failed job", id, "failed"}, {"hook job", hookID, "completed"}} {
		b.do("open the "+page.name,
			chromedp.Navigate(f.url+"/jobs/"+page.id),
			chromedp.WaitVisible(chromedp.CSS(`#job-status .status-`+page.status)),
			pageText("pin=*** pw=*** token=***"),
		)
		b.screenshot(strings.ReplaceAll(page.name, " ", "-"))
		// Everything the page holds, collapsed sections included.
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		noSecretIn(t, "the "+page.name+" page", text)
	}
}
