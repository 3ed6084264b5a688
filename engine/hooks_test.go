package engine_test

import (
	"errors"
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
	if !strings.HasPrefix(c.Spec.Script, "echo 'build completed true in ") || !strings.HasSuffix(c.Spec.Script, "s from api'") {
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

// endWithHooksHeld fails the last job's only step while template renders
// are held, so the job ends with its hook (the workspace's templated
// on_error) still rendering. It returns the release of the renders.
func endWithHooksHeld(t *testing.T, f *enginetest.Fixture, job string) (release func()) {
	t.Helper()
	f.ClaimJobStep(job, "only")
	release = f.Engine.HoldRenders()
	t.Cleanup(release)
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, "only"); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "only", enginetest.Exit(1)); err != nil {
		t.Fatal(err)
	}
	// CompleteStep answers once the batch that ended the job is
	// committed; the fixture's own reads would wait for the held render.
	j, err := f.Store.Job(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != engine.JobFailed || !j.HooksPending {
		t.Fatalf("job %s is %s with hooks_pending %v, want failed with its hook rendering", job, j.Status, j.HooksPending)
	}
	if n := len(hookJobs(t, f, job)); n != 0 {
		t.Fatalf("%d hook jobs before the render came back, want 0", n)
	}
	return release
}

// activeIDs lists the jobs the store would load at a restart.
func activeIDs(t *testing.T, f *enginetest.Fixture) []string {
	t.Helper()
	jobs, _, _, err := f.Store.LoadActive(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	return ids
}

func TestHooksPendingAtACrashFireOnceAfterTheRestart(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	release := endWithHooksHeld(t, f, job)
	if !slices.Contains(activeIDs(t, f), job) {
		t.Fatalf("the ended job with hooks pending is not among the active ones: %v", activeIDs(t, f))
	}

	// The server dies before the hook's render comes back.
	f.Restart()
	f.Settle()
	release() // the old engine's render: stopped, it must create nothing
	hooks := hookJobs(t, f, job)
	if len(hooks) != 1 || hooks[0].TaskName != "notify" || hooks[0].Input["message"] != "fallback for plain" {
		t.Fatalf("hook jobs after the restart = %+v, want one notify job", hooks)
	}
	if j := f.Job(job); j.HooksPending || j.Status != engine.JobFailed {
		t.Fatalf("job after the restart: status %s, hooks_pending %v; want failed, cleared", j.Status, j.HooksPending)
	}
	if slices.Contains(activeIDs(t, f), job) {
		t.Fatalf("job %s is still active once its hooks fired", job)
	}
	// Its log says so once, and is finished again so an archive holds it.
	started := 0
	for _, l := range f.Logs.ServerLines(job) {
		if strings.HasPrefix(l, `hook "notify" started job `) {
			started++
		}
	}
	if started != 1 {
		t.Errorf("hook start lines = %d, want 1:\n%s", started, strings.Join(f.Logs.ServerLines(job), "\n"))
	}
	if n := f.Logs.Finished(job); n != 2 {
		t.Errorf("log finished %d times, want 2 (at the end, and after the recovered hooks)", n)
	}

	// The hook job runs as any other; another restart fires nothing more.
	f.RunJobStep(hooks[0].ID, "notify", enginetest.Ok(nil))
	f.WaitStatus(hooks[0].ID, engine.JobCompleted)
	f.Restart()
	f.Settle()
	if n := len(hookJobs(t, f, job)); n != 1 {
		t.Fatalf("%d hook jobs after a second restart, want 1", n)
	}
}

func TestHooksFireOnceWhenAReloadOvertakesTheirRender(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	release := endWithHooksHeld(t, f, job)

	// A failed commit reloads the state from the store, which fires the
	// pending hooks again; the first render must then come to nothing.
	f.Store.FailNextCommit(errors.New("disk full"))
	if _, err := f.Engine.RegisterWorker(t.Context(), "other", nil, false, ""); err == nil {
		t.Fatal("register: the failed commit was not reported")
	}
	release()
	f.Settle()
	if n := len(hookJobs(t, f, job)); n != 1 {
		t.Fatalf("%d hook jobs, want 1", n)
	}
	if f.Job(job).HooksPending {
		t.Fatal("hooks_pending not cleared")
	}
}

func TestHooksCreatedBeforeARestartDoNotFireAgain(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	f.RunStep("only", enginetest.Exit(1))
	if n := len(hookJobs(t, f, job)); n != 1 {
		t.Fatalf("%d hook jobs, want 1", n)
	}
	if j := f.Job(job); j.HooksPending {
		t.Fatal("hooks_pending still set once the hook job exists")
	}
	f.Restart()
	f.Settle()
	if n := len(hookJobs(t, f, job)); n != 1 {
		t.Fatalf("%d hook jobs after the restart, want 1", n)
	}
	if n := f.Logs.Finished(job); n != 1 {
		t.Errorf("log finished %d times, want 1", n)
	}
}

func TestPendingHooksOfAnUnloadedWorkspaceAreReportedAndDropped(t *testing.T) {
	f := enginetest.New(t, hookYAML)
	job := f.Execute("plain", nil)
	endWithHooksHeld(t, f, job)

	f.Workspaces.Remove(enginetest.WorkspaceName)
	f.Restart()
	f.Settle()
	if n := len(hookJobs(t, f, job)); n != 0 {
		t.Fatalf("%d hook jobs, want 0", n)
	}
	want := `hooks could not fire after a restart: workspace "main" is no longer loaded`
	if !slices.Contains(f.Logs.ServerLines(job), want) {
		t.Errorf("server lines lack %q:\n%s", want, strings.Join(f.Logs.ServerLines(job), "\n"))
	}
	if f.Job(job).HooksPending || slices.Contains(activeIDs(t, f), job) {
		t.Error("the job stays pending: its hooks would be retried at every start")
	}
}
