package api_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// secretsWorkflow has a job whose secrets arrive in turn: the job's `pin`
// at creation, then `later` once step second resolves it into an action
// input defined secret, after step first has already failed quoting it.
const secretsWorkflow = `
secrets:
  TOKEN: ws-token-value
actions:
  use-key:
    type: script
    input:
      key: {type: string, secret: true}
    script: "true"
  ask:
    type: approval
    message: "approve pin {{ input.pin }} and key {{ input.later }}"
    input:
      pin: {type: string}
      later: {type: string}
      code: {type: string, secret: true}
  gate:
    type: approval
    message: "go?"
    input:
      code: {type: string, secret: true}
tasks:
  gated:
    flow:
      gate: {action: gate}
  leak:
    input:
      pin: {type: string, secret: true}
      later: {type: string}
    flow:
      first:
        type: script
        script: "true"
      second:
        depends_on: [first]
        continue_on_failure: true
        action: use-key
        input: {key: "{{ input.later }}"}
      ok:
        depends_on: [second]
        action: ask
        input: {pin: "{{ input.pin }}", later: "{{ input.later }}"}
  fail:
    flow:
      run:
        action: use-key
        input: {key: "{{ secret.TOKEN }}"}
triggers:
  leak-sync: {type: webhook, name: leak-sync, task: fail, mode: sync, timeout_secs: 30}
  leak-async: {type: webhook, name: leak-async, task: fail}
  gated: {type: webhook, name: gated, task: gated}
`

// secretValues are what secretsWorkflow's answers must never show.
var secretValues = []string{"pin-12345", "later-secret-1", "ws-token-value", "approver-code-1"}

func newSecretsFixture(t *testing.T) *fixture {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "sec")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), secretsWorkflow, 0o644)
	return startAPI(t, tmp, map[string]string{"sec": dir})
}

// noSecretIn fails the test when an answer shows a secret value.
func noSecretIn(t *testing.T, what string, r response) {
	t.Helper()
	for _, s := range secretValues {
		if strings.Contains(string(r.body), s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, r.body)
		}
	}
}

// failStep claims, starts and fails a step with an error message.
func (f *fixture) failStep(workerID, jobID, step, msg string) {
	f.t.Helper()
	f.endStep(workerID, jobID, step, nil, 1, msg)
}

// TestAnswersMaskSecretsLearnedAfterAStepFailed: step first fails quoting a
// value that only becomes secret when step second resolves it, so its
// record holds it; every answer about the job masks it all the same, as
// the log masks it from then on.
func TestAnswersMaskSecretsLearnedAfterAStepFailed(t *testing.T) {
	f := newSecretsFixture(t)
	w := f.register("w1")
	id, _ := f.api("POST", "/api/workspaces/sec/tasks/leak/execute", map[string]any{
		"input": map[string]any{"pin": "pin-12345", "later": "later-secret-1"},
	}).expect(200).object()["job_id"].(string)

	f.failStep(w, id, "first", "boom pin-12345 later-secret-1 ws-token-value")
	claim := f.claimStep(w, id, "second")
	if in, _ := claim["input"].(map[string]any); in["key"] != "later-secret-1" {
		t.Fatalf("claim input %v: the worker must get the secret itself", claim["input"])
	}
	f.worker("POST", "/worker/jobs/"+id+"/steps/second/start", map[string]any{"worker_id": w}).expect(200)
	f.pushLogs(w, id, "second", "using later-secret-1 and pin-12345")
	f.worker("POST", "/worker/jobs/"+id+"/steps/second/complete", map[string]any{
		"worker_id": w, "output": map[string]any{}, "exit_code": 0, "error": nil,
	}).expect(200)
	eventually(t, "the approval to wait", func() bool {
		for _, s := range f.api("GET", "/api/jobs/"+id, nil).expect(200).object()["steps"].([]any) {
			if s := s.(map[string]any); s["step_name"] == "ok" && s["status"] == "waiting" {
				return true
			}
		}
		return false
	})

	detail := f.api("GET", "/api/jobs/"+id, nil).expect(200)
	noSecretIn(t, "the job detail", detail)
	for _, s := range detail.object()["steps"].([]any) {
		s := s.(map[string]any)
		switch s["step_name"] {
		case "first":
			if s["error_message"] != "boom *** *** ***" {
				t.Errorf("first error_message %q", s["error_message"])
			}
		case "ok":
			if s["message"] != "approve pin *** and key ***" {
				t.Errorf("approval message %q", s["message"])
			}
		}
	}
	worker := f.api("GET", "/api/workers/"+w, nil).expect(200)
	noSecretIn(t, "the worker detail", worker)
	if !strings.Contains(string(worker.body), `"error_message":"boom *** *** ***"`) {
		t.Errorf("worker detail lacks first's masked error_message:\n%s", worker.body)
	}
	noSecretIn(t, "the job list", f.api("GET", "/api/jobs", nil).expect(200))
	noSecretIn(t, "the job's log", f.api("GET", "/api/jobs/"+id+"/steps/second/logs", nil).expect(200))

	noSecretIn(t, "the approval answer", f.api("POST", "/api/jobs/"+id+"/steps/ok/approve", map[string]any{
		"approved": true, "input": map[string]any{"code": "approver-code-1"},
	}).expect(200))
	if st := f.jobStatus(id); st != "failed" { // first failed
		t.Fatalf("job %s, want failed", st)
	}
	// Ended, the job's secrets are computed again from the store.
	noSecretIn(t, "the ended job's detail", f.api("GET", "/api/jobs/"+id, nil).expect(200))
	noSecretIn(t, "the worker detail after the job ended", f.api("GET", "/api/workers/"+w, nil).expect(200))
}

// TestWebhookAnswersShowNoSecret: a webhook's answers (sync result and
// status) carry the job's status and output, never its input or a step's
// error, so a failure quoting a secret does not reach the caller.
func TestWebhookAnswersShowNoSecret(t *testing.T) {
	f := newSecretsFixture(t)
	w := f.register("w1")

	type answer struct {
		r   response
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := f.hook("POST", "/hooks/leak-sync", "application/json", `{"pin": "pin-12345"}`, nil)
		got <- answer{r, err}
	}()
	var id string
	eventually(t, "the webhook's job", func() bool {
		items := f.api("GET", "/api/jobs", nil).expect(200).object()["items"].([]any)
		if len(items) == 0 {
			return false
		}
		id = items[0].(map[string]any)["job_id"].(string)
		return true
	})
	f.failStep(w, id, "run", "cannot use ws-token-value")
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	sync := a.r.expect(200)
	noSecretIn(t, "the sync webhook answer", sync)
	m := sync.object()
	assertKeys(t, "sync webhook answer", m, "job_id", "trigger", "task", "status", "output")
	if m["status"] != "failed" || m["output"] != nil {
		t.Fatalf("sync answer %v", m)
	}
	// The detail shows the failure masked; the hook's status answer, none.
	if d := f.api("GET", "/api/jobs/"+id, nil).expect(200); !strings.Contains(string(d.body), "cannot use ***") {
		t.Errorf("job detail lacks the masked error:\n%s", d.body)
	}

	r := f.mustHook("POST", "/hooks/leak-async", "application/json", `{}`, nil).expect(200)
	async, _ := r.object()["job_id"].(string)
	f.failStep(w, async, "run", "cannot use ws-token-value")
	status := f.mustHook("GET", "/hooks/leak-async/jobs/"+async+"?wait=true&timeout=30", "", "", nil).expect(200)
	noSecretIn(t, "the webhook status answer", status)
	assertKeys(t, "webhook status answer", status.object(), "job_id", "trigger", "task", "status", "output", "created_at", "completed_at")
}

// TestWebhookAnswerMasksAnApproversSecret: a job's output is shown as its
// steps wrote it, but an approval's holds what the approver typed, and
// its secret fields are masked as in the job detail.
func TestWebhookAnswerMasksAnApproversSecret(t *testing.T) {
	f := newSecretsFixture(t)
	id, _ := f.mustHook("POST", "/hooks/gated", "application/json", `{}`, nil).expect(200).object()["job_id"].(string)
	eventually(t, "the approval to wait", func() bool {
		_, steps, err := f.eng.Job(t.Context(), id)
		return err == nil && len(steps) == 1 && steps[0].Status == "waiting"
	})
	f.api("POST", "/api/jobs/"+id+"/steps/gate/approve", map[string]any{
		"approved": true, "input": map[string]any{"code": "approver-code-1"},
	}).expect(200)
	status := f.mustHook("GET", "/hooks/gated/jobs/"+id+"?wait=true&timeout=30", "", "", nil).expect(200)
	noSecretIn(t, "the webhook status answer", status)
	out, _ := status.object()["output"].(map[string]any)
	gate, _ := out["gate"].(map[string]any)
	if in, _ := gate["input"].(map[string]any); in["code"] != "***" || gate["approved_by"] != "anonymous" {
		t.Fatalf("webhook output %v, want the approval with its code masked", out)
	}
	noSecretIn(t, "the job detail", f.api("GET", "/api/jobs/"+id, nil).expect(200))
}
