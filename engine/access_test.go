package engine_test

import (
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const accessYAML = `
actions:
  deploy:
    type: script
    script: echo {{ input.message }}
  run-report:
    type: task
    task: report
tasks:
  deploy:
    flow:
      only: {type: script, script: "true"}
  rotate:
    folder: /secret/
    flow:
      call: {action: run-report}
    on_success:
      - action: deploy
        input: {message: "{{ hook.task_name }}"}
      - action: run-report
  report:
    folder: reports
    flow:
      only: {type: script, script: "true"}
`

// A job stores the path access control judges it by when it is created:
// its task's folder/task, a child job its own task's, and a hook job the
// firing job's, whatever its action is named (here like a task at the
// root) and whether the action runs a task.
func TestJobsStoreTheAccessPathTheyWereCreatedFor(t *testing.T) {
	f := enginetest.New(t, accessYAML)
	if j := f.Job(f.Execute("deploy", nil)); j.AccessPath != "deploy" {
		t.Errorf("root task job: access path %q, want deploy", j.AccessPath)
	}
	job := f.Execute("rotate", nil)
	call := f.WaitStep(job, "call", engine.StepRunning)
	if child := f.Job(call.ChildJobID); child.AccessPath != "reports/report" {
		t.Errorf("child job: access path %q, want its own task's reports/report", child.AccessPath)
	}
	f.RunJobStep(call.ChildJobID, "only", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
	if got := f.Job(job).AccessPath; got != "secret/rotate" {
		t.Errorf("job of a task in a folder: access path %q, want secret/rotate", got)
	}
	hooks := hookJobs(t, f, job)
	if len(hooks) != 2 {
		t.Fatalf("%d hook jobs, want 2", len(hooks))
	}
	for _, h := range hooks {
		if h.AccessPath != "secret/rotate" {
			t.Errorf("hook job of task %q: access path %q, want the firing job's secret/rotate", h.TaskName, h.AccessPath)
		}
	}
}
