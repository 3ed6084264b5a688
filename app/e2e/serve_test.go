package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// The example workspace, as `go run . serve` serves it.
var examples = map[string]string{"examples": "../../examples"}

func TestHelloWorldPassesOutputToTheNextStep(t *testing.T) { helloWorldPassesOutput(t) }

func helloWorldPassesOutput(t *testing.T, storage ...func(*config.Server)) {
	f := startFixture(t, examples, 2, storage...)
	id := f.execute("examples", "hello-world", map[string]any{"name": "Ada"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	first := j.step("say-hello")
	if out, _ := first.Output.(map[string]any); out["greeting"] != "Hello, Ada!" {
		t.Fatalf("say-hello output = %#v", first.Output)
	}
	if got := j.step("echo-greeting").Input["greeting"]; got != "Hello, Ada!" {
		t.Fatalf("echo-greeting input = %#v", got)
	}
	if logs := f.logs(id, "echo-greeting"); !strings.Contains(logs, "the first step said: Hello, Ada!") {
		t.Fatalf("echo-greeting log does not show the passed output:\n%s", logs)
	}
	if logs := f.logs(id, ""); !strings.Contains(logs, `"step":"say-hello"`) || !strings.Contains(logs, `"step":"echo-greeting"`) {
		t.Fatalf("job log lacks a step's lines:\n%s", logs)
	}
}

func TestFailingPythonStepReportsTheException(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "pipeline", map[string]any{"fail_tests": true})
	j := f.waitTerminal(id)
	if j.Status != "failed" {
		t.Fatalf("job status %s, want failed", j.Status)
	}
	tests := j.step("unit-tests")
	if tests.Status != "failed" || tests.ErrorMessage == nil {
		t.Fatalf("unit-tests: %+v", tests)
	}
	if msg := *tests.ErrorMessage; !strings.Contains(msg, "RuntimeError: the unit suite failed on purpose") || !strings.HasPrefix(msg, "Exit code: 1") {
		t.Fatalf("error_message lacks the exit code or the exception:\n%s", msg)
	}
	if b := j.step("build"); b.Status != "skipped" {
		t.Fatalf("build after a failed test run: %s, want skipped", b.Status)
	}

	// The task's on_error hook ran the notify action with the hook context
	// (its input renders off the orchestrator, so its job follows the
	// failed job's end by a moment).
	type hookJobs struct {
		Items []struct {
			JobID      string  `json:"job_id"`
			SourceType string  `json:"source_type"`
			SourceID   *string `json:"source_id"`
		} `json:"items"`
	}
	hooks := waitFor(t, "the on_error hook's job", func() (h hookJobs) {
		do(t, "GET", f.url+"/api/jobs?workspace=examples&task_name=notify", nil, &h)
		return h
	}, func(h hookJobs) bool { return len(h.Items) > 0 })
	if len(hooks.Items) != 1 || hooks.Items[0].SourceType != "hook" || *hooks.Items[0].SourceID != id {
		t.Fatalf("hook jobs: %+v", hooks.Items)
	}
	hook := f.waitTerminal(hooks.Items[0].JobID)
	if logs := f.logs(hook.JobID, "notify"); hook.Status != "completed" || !strings.Contains(logs, "notify: pipeline failed: unit-tests: Exit code: 1") {
		t.Fatalf("hook job %s, log:\n%s", hook.Status, logs)
	}
}

func TestPipelineFansOutAndSkipsDeployOnDryRun(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "pipeline", map[string]any{"targets": "linux,darwin,windows"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job status %s: %+v", j.Status, j.Steps)
	}
	for i := 0; i < 3; i++ {
		if s := j.step("build[" + strconv.Itoa(i) + "]"); s.Status != "completed" {
			t.Fatalf("build[%d]: %+v", i, s)
		}
	}
	if outs, _ := j.step("build").Output.([]any); len(outs) != 3 {
		t.Fatalf("build output = %#v, want 3 aggregated outputs", j.step("build").Output)
	}
	if d := j.step("deploy"); d.Status != "skipped" {
		t.Fatalf("deploy on a dry run: %s, want skipped", d.Status)
	}
}

func TestCancelKillsTheRunningProcess(t *testing.T) {
	f := startFixture(t, examples, 2)
	// A length no other test sleeps, so the process found is this step's
	// (the runners tests run `sleep 300` at the same time).
	id := f.execute("examples", "sleep", map[string]any{"seconds": 3017})
	f.waitJob(id, "the sleep step to start", func(j jobView) bool { return j.step("sleep").Status == "running" })

	// The sleep runs under bash in its own process group; find it.
	pgid := waitSleepProcess(t, "sleep -- 3017")
	var out struct {
		Status string `json:"status"`
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, &out); code != 200 || out.Status != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, out)
	}
	j := f.waitTerminal(id)
	if j.Status != "cancelled" || j.step("sleep").Status != "cancelled" {
		t.Fatalf("after cancel: job %s, step %s", j.Status, j.step("sleep").Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still alive after cancel", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var errBody struct {
		Error string `json:"error"`
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, &errBody); code != 409 || errBody.Error == "" {
		t.Fatalf("second cancel: %d %+v, want 409 with an error", code, errBody)
	}
}

// waitSleepProcess finds the process group of the process running cmdline.
func waitSleepProcess(t *testing.T, cmdline string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pgid, err := findProcessGroup(cmdline); err == nil {
			return pgid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q found", cmdline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecuteAppliesDefaultsAndRejectsMissingRequiredInput(t *testing.T) {
	f := startFixture(t, examples, 0)
	var errBody struct {
		Error string `json:"error"`
	}
	code := do(t, "POST", f.url+"/api/workspaces/examples/tasks/release/execute", map[string]any{"input": map[string]any{}}, &errBody)
	if code != 400 || !strings.Contains(errBody.Error, `"version"`) {
		t.Fatalf("missing required input: %d %q, want 400 naming the field", code, errBody.Error)
	}

	id := f.execute("examples", "release", map[string]any{"version": "1.2.3"})
	j := f.job(id)
	if j.Input["channel"] != "stable" || j.Input["version"] != "1.2.3" {
		t.Fatalf("job input %v, want the default channel filled in", j.Input)
	}
	if j.Status != "pending" {
		t.Fatalf("job without workers: %s, want pending", j.Status)
	}

	for _, c := range []struct {
		path string
		code int
	}{
		{"/api/workspaces/nope/tasks/release/execute", 404},
		{"/api/workspaces/examples/tasks/nope/execute", 404},
	} {
		if got := do(t, "POST", f.url+c.path, `{"input": {}}`, &errBody); got != c.code || errBody.Error == "" {
			t.Errorf("POST %s: %d %q, want %d with an error", c.path, got, errBody.Error, c.code)
		}
	}
	if got := do(t, "POST", f.url+"/api/workspaces/examples/tasks/release/execute", `{"input": `, &errBody); got != 400 {
		t.Errorf("malformed JSON: %d, want 400", got)
	}
}

const reloadWorkspace = `tasks:
  versioned:
    input:
      gate: {type: string, required: true}
    flow:
      wait:
        type: script
        script: while [ ! -f "{{ input.gate }}" ]; do sleep 0.02; done
      say:
        type: script
        depends_on: [wait]
        script: echo "%s"
`

type workspaceView struct {
	Name     string   `json:"name"`
	Revision string   `json:"revision"`
	Errors   []string `json:"errors"`
}

func (f *serverFixture) workspace(name string) workspaceView {
	f.t.Helper()
	var list []workspaceView
	do(f.t, "GET", f.url+"/api/workspaces", nil, &list)
	for _, w := range list {
		if w.Name == name {
			return w
		}
	}
	f.t.Fatalf("workspace %q not listed", name)
	return workspaceView{}
}

// waitWorkspace polls the workspace list until cond holds.
func (f *serverFixture) waitWorkspace(name, what string, cond func(workspaceView) bool) workspaceView {
	f.t.Helper()
	return waitFor(f.t, "workspace "+name+": "+what, func() workspaceView { return f.workspace(name) }, cond)
}

func TestHotReloadNewJobsUseTheNewRevisionRunningJobsKeepTheirs(t *testing.T) {
	dir := t.TempDir()
	writeWorkspace(t, dir, fmt.Sprintf(reloadWorkspace, "version one"))
	f := startFixture(t, map[string]string{"ws": dir}, 2)
	first := f.workspace("ws")
	gate := filepath.Join(t.TempDir(), "gate")

	old := f.execute("ws", "versioned", map[string]any{"gate": gate})
	f.waitJob(old, "its first step to run", func(j jobView) bool { return j.step("wait").Status == "running" })

	writeWorkspace(t, dir, fmt.Sprintf(reloadWorkspace, "version two"))
	second := f.waitWorkspace("ws", "the edit to load", func(w workspaceView) bool { return w.Revision != first.Revision })
	updated := f.execute("ws", "versioned", map[string]any{"gate": gate})

	// A broken edit is reported and changes nothing for new jobs.
	writeWorkspace(t, dir, "tasks:\n  versioned:\n    flow: {say: {type: script}}\n")
	broken := f.waitWorkspace("ws", "the errors to be listed", func(w workspaceView) bool { return len(w.Errors) > 0 })
	if broken.Revision != second.Revision || !strings.Contains(broken.Errors[0], ".workflows/main.yaml:") {
		t.Fatalf("after a broken edit: %+v", broken)
	}
	afterBreak := f.execute("ws", "versioned", map[string]any{"gate": gate})

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct{ rev, line string }{
		old:        {first.Revision, "version one"},
		updated:    {second.Revision, "version two"},
		afterBreak: {second.Revision, "version two"},
	} {
		j := f.waitTerminal(id)
		if j.Status != "completed" || j.Revision != want.rev {
			t.Fatalf("job %s: %s on revision %s, want completed on %s", id, j.Status, j.Revision, want.rev)
		}
		if logs := f.logs(id, "say"); !strings.Contains(logs, want.line) {
			t.Fatalf("job on revision %s printed %q, want %q", j.Revision, logs, want.line)
		}
	}
}

func TestPipelineDeploysAndRunsAChildJob(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "pipeline", map[string]any{"dry_run": false})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	deploy := j.step("deploy")
	if env, _ := deploy.Input["environment"].(map[string]any); deploy.Status != "completed" || env["url"] != "https://staging.example.com" {
		t.Fatalf("deploy: %+v, want completed with the staging connection resolved", deploy)
	}
	if logs := f.logs(id, "deploy"); !strings.Contains(logs, "deploying to https://staging.example.com") {
		t.Fatalf("deploy log: %s", logs)
	}
	if greet := j.step("greet"); greet.Status != "completed" {
		t.Fatalf("greet (a task step): %+v, want completed", greet)
	}
	var children struct {
		Items []struct {
			JobID      string  `json:"job_id"`
			Status     string  `json:"status"`
			SourceType string  `json:"source_type"`
			SourceID   *string `json:"source_id"`
		} `json:"items"`
	}
	do(t, "GET", f.url+"/api/jobs?workspace=examples&task_name=hello-world", nil, &children)
	if len(children.Items) != 1 || children.Items[0].SourceType != "task" || *children.Items[0].SourceID != id || children.Items[0].Status != "completed" {
		t.Fatalf("child jobs: %+v", children.Items)
	}
}

const approvalWorkspace = `tasks:
  release:
    input:
      version: {type: string}
    flow:
      ask:
        type: approval
        message: "Ship {{ input.version | default('it') }}?"
      ship:
        depends_on: [ask]
        type: script
        script: echo shipped by {{ ask.output.approved_by }}
`

func TestApprovalOverTheAPI(t *testing.T) { approvalOverTheAPI(t) }

func approvalOverTheAPI(t *testing.T, storage ...func(*config.Server)) {
	dir := t.TempDir()
	writeWorkspace(t, dir, approvalWorkspace)
	f := startFixture(t, map[string]string{"ws": dir}, 1, storage...)
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	approve := func(id, step, body string) int {
		out.Status, out.Error = "", ""
		return do(t, "POST", f.url+"/api/jobs/"+id+"/steps/"+step+"/approve", body, &out)
	}

	id := f.execute("ws", "release", map[string]any{"version": "2.0"})
	f.waitJob(id, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	var detail struct {
		Steps []struct {
			StepName string `json:"step_name"`
			Message  string `json:"message"`
		} `json:"steps"`
	}
	do(t, "GET", f.url+"/api/jobs/"+id, nil, &detail)
	if detail.Steps[0].Message != "Ship 2.0?" {
		t.Fatalf("approval message %q", detail.Steps[0].Message)
	}
	for _, c := range []struct {
		step, body string
		code       int
	}{
		{"ask", `{}`, 400},
		{"ask", `{"approved": `, 400},
		{"ship", `{"approved": true}`, 409},
		{"nope", `{"approved": true}`, 404},
		{"ask", `{"approved": true, "input": {"ticket": "OPS-1"}}`, 400},
	} {
		if code := approve(id, c.step, c.body); code != c.code || out.Error == "" {
			t.Errorf("approve %s with %s: %d %q, want %d with an error", c.step, c.body, code, out.Error, c.code)
		}
	}
	approve(id, "ask", `{"approved": true, "input": {"ticket": "OPS-1"}}`)
	if want := `input "ticket": unknown (declared: none)`; !strings.Contains(out.Error, want) {
		t.Errorf("approval with an undeclared input key: %q, want it to say %s", out.Error, want)
	}
	if code := approve(id, "ask", `{"approved": true}`); code != 200 || out.Status != "approved" {
		t.Fatalf("approve: %d %+v", code, out)
	}
	j := f.waitTerminal(id)
	if j.Status != "completed" || !strings.Contains(f.logs(id, "ship"), "shipped by anonymous") {
		t.Fatalf("approved job %s, ship log %q", j.Status, f.logs(id, "ship"))
	}

	id = f.execute("ws", "release", nil)
	f.waitJob(id, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	if code := approve(id, "ask", `{"approved": false, "rejection_reason": "freeze"}`); code != 200 || out.Status != "rejected" {
		t.Fatalf("reject: %d %+v", code, out)
	}
	j = f.waitTerminal(id)
	if j.Status != "failed" || j.step("ship").Status != "skipped" || *j.step("ask").ErrorMessage != "Rejected by anonymous: freeze" {
		t.Fatalf("rejected job %s: %+v", j.Status, j.Steps)
	}
}

// secretSources declares a workspace secret, read from
// APPLIANCE_TEST_API_TOKEN, and a connection with a secret property.
const secretSources = `secrets:
  API_TOKEN: "{{ env.APPLIANCE_TEST_API_TOKEN }}"
connection_types:
  db:
    host: {type: string, required: true}
    password: {type: string, secret: true}
connections:
  prod: {type: db, host: db.internal, password: hunter2-pw}
`

const secretsWorkspace = secretSources + `tasks:
  leaky:
    input:
      pin: {type: string, secret: true}
      name: {type: string}
      target: {type: db}
    flow:
      talk:
        type: script
        script: |
          echo "pin={{ input.pin }} name={{ input.name }}"
          echo "db={{ input.target.host }} pw={{ input.target.password }}"
          echo "token={{ secret.API_TOKEN }}"
`

func TestSecretValuesAreMaskedInLogs(t *testing.T) {
	t.Setenv("APPLIANCE_TEST_API_TOKEN", "tok-1234567")
	dir := t.TempDir()
	writeWorkspace(t, dir, secretsWorkspace)
	f := startFixture(t, map[string]string{"ws": dir}, 1)
	id := f.execute("ws", "leaky", map[string]any{"pin": "9876", "name": "ada", "target": "prod"})
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s", j.Status)
	}
	logs := f.logs(id, "talk")
	for _, want := range []string{"pin=*** name=ada", "db=db.internal pw=***", "token=***"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, secret := range []string{"9876", "hunter2-pw", "tok-1234567"} {
		if strings.Contains(logs, secret) {
			t.Errorf("log shows the secret %q:\n%s", secret, logs)
		}
	}
}
