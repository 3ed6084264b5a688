package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const hookYAML = `
actions:
  notify:
    type: script
    input:
      message: {type: string, required: true}
    script: echo {{ input.message }}
  hello:
    type: task
    task: quiet
tasks:
  build:
    flow:
      compile:
        type: script
        script: make
      lint:
        type: script
        script: lint
        continue_on_failure: true
    on_success:
      - action: notify
        input:
          message: "{{ hook.task_name }} {{ hook.status }} {{ hook.is_success }} in {{ hook.duration_secs }}s from {{ hook.source_type }}"
      - action: hello
        input: {who: "{{ hook.job_id }}"}
    on_error:
      - action: notify
        input:
          message: "{{ hook.status }}: {{ hook.error_message }} / {{ hook.failed_steps | length }} failed, first {{ hook.failed_steps[0].step_name if hook.failed_steps else 'none' }}"
  plain:
    flow:
      only: {type: script, script: "true"}
  broken-hook:
    flow:
      only: {type: script, script: "true"}
    on_success:
      - action: notify
        input: {message: "{{ hook.nope }}"}
  quiet:
    input:
      who: {type: string}
    flow:
      only: {type: script, script: "true"}
on_error:
  - action: notify
    input: {message: "fallback for {{ hook.task_name }}"}
`

// hookJobs lists the jobs a job's hooks started, newest first.
func hookJobs(t *testing.T, f *enginetest.Fixture, source string) []*engine.Job {
	t.Helper()
	jobs, _, err := f.Engine.Jobs(t.Context(), engine.JobFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Job
	for _, j := range jobs {
		if j.SourceType == engine.SourceHook && j.SourceID != nil && *j.SourceID == source {
			out = append(out, j)
		}
	}
	return out
}

func TestSuccessHooksStartJobsWithTheHookContext(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("build", nil)
	f.RunStep("compile", enginetest.Ok(nil))
	f.RunStep("lint", enginetest.Exit(1)) // tolerated: the job still succeeds
	f.WaitStatus(job, engine.JobCompleted)

	hooks := hookJobs(t, f, job)
	if len(hooks) != 2 {
		t.Fatalf("%d hook jobs, want 2 (notify and the hello task)", len(hooks))
	}
	byTask := map[string]*engine.Job{}
	for _, h := range hooks {
		byTask[h.TaskName] = h
	}
	notify := byTask["notify"]
	if notify == nil || !strings.HasPrefix(notify.Input["message"].(string), "build completed true in ") ||
		!strings.HasSuffix(notify.Input["message"].(string), "s from api") {
		t.Fatalf("notify hook job %+v", notify)
	}
	c := f.RunJobStep(notify.ID, "notify", enginetest.Ok(nil))
	if !strings.HasPrefix(c.Spec.Script, "echo build completed true") {
		t.Fatalf("hook step script %q", c.Spec.Script)
	}
	f.WaitStatus(notify.ID, engine.JobCompleted)
	if quiet := byTask["quiet"]; quiet == nil || quiet.Input["who"] != job {
		t.Fatalf("task-action hook job %+v, want a job of task quiet for %s", quiet, job)
	}
	if lines := f.Logs.ServerLines(job); len(lines) != 2 || !strings.HasPrefix(lines[0], `hook "notify" started job `) {
		t.Fatalf("_server lines %q", lines)
	}
	if more := hookJobs(t, f, notify.ID); len(more) != 0 {
		t.Fatalf("a hook job fired hooks: %+v", more)
	}
}

func TestErrorHooksGetTheFailedSteps(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("build", nil)
	f.RunStep("compile", enginetest.Fail(2, "Exit code: 2\nno rule to make"))
	f.RunStep("lint", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobFailed)
	hooks := hookJobs(t, f, job)
	if len(hooks) != 1 || hooks[0].TaskName != "notify" {
		t.Fatalf("hook jobs %+v, want the task's on_error notify only", hooks)
	}
	want := "failed: compile: Exit code: 2\nno rule to make / 1 failed, first compile"
	if got := hooks[0].Input["message"]; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestCancelFiresErrorHooksAndWorkspaceFallback(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobCancelled)
	hooks := hookJobs(t, f, job)
	if len(hooks) != 1 || hooks[0].Input["message"] != "fallback for plain" {
		t.Fatalf("hook jobs %+v, want the workspace's on_error fallback", hooks)
	}
}

func TestFailedHookIsReportedInTheJobsLog(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("broken-hook", nil)
	f.RunStep("only", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
	lines := f.Logs.ServerLines(job)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], `hook "notify" did not start: input: `) {
		t.Fatalf("_server lines %q", lines)
	}

	// A hook job that fails is reported to the job that fired it.
	job = f.Execute("plain", nil)
	f.RunStep("only", enginetest.Exit(1))
	f.WaitStatus(job, engine.JobFailed)
	fallback := hookJobs(t, f, job)[0]
	f.RunJobStep(fallback.ID, "notify", enginetest.Exit(3))
	f.WaitStatus(fallback.ID, engine.JobFailed)
	want := "hook job " + fallback.ID + " (notify) failed"
	f.Eventually(func() bool { return slices.Contains(f.Logs.ServerLines(job), want) },
		func() string { return strings.Join(f.Logs.ServerLines(job), "\n") })
}

func TestHookJobSurvivesARestart(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	f.RunStep("only", enginetest.Exit(1))
	f.WaitStatus(job, engine.JobFailed)
	hook := hookJobs(t, f, job)[0]
	f.Restart()
	f.RunJobStep(hook.ID, "notify", enginetest.Ok(nil))
	f.WaitStatus(hook.ID, engine.JobCompleted)
}
