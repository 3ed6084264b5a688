package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestRestartKeepsRemoteStepsAndFailsInProcessOnes(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
remote: {action: ok, timeout: 1h}
local: {action: ok}
after-remote: {action: ok, depends_on: [remote]}
after-local: {action: ok, depends_on: [local]}
waiting: {action: ok}`)), enginetest.Options{HeartbeatTimeout: 90 * time.Second})
	edge := f.Register("edge", nil, false)
	job := f.Execute("t", nil)
	if c, err := f.Engine.Claim(t.Context(), edge, 0); err != nil || c == nil || c.StepName != "remote" {
		t.Fatalf("remote claim = %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), edge, job, "remote"); err != nil {
		t.Fatal(err)
	}
	claimAndStart(t, f, job, "local")
	oldWorker := f.Worker

	f.Restart()

	local := f.Step(job, "local")
	if want := "Worker heartbeat timeout (worker fixture unresponsive)"; local.Status != engine.StepFailed || deref(local.ErrorMessage) != want {
		t.Errorf("in-process step = %s %q, want failed %q", local.Status, deref(local.ErrorMessage), want)
	}
	if s := f.Step(job, "after-local"); s.Status != engine.StepSkipped {
		t.Errorf("after-local is %s, want skipped", s.Status)
	}
	if s := f.Step(job, "remote"); s.Status != engine.StepRunning || deref(s.WorkerID) != edge {
		t.Errorf("remote step = %s held by %s, want still running on the remote worker", s.Status, deref(s.WorkerID))
	}
	if w, _, _, _ := f.Engine.Worker(t.Context(), oldWorker); w.Status != engine.WorkerInactive {
		t.Errorf("old in-process worker is %s, want inactive", w.Status)
	}
	// The ready index was rebuilt: the new in-process worker gets the ready step.
	f.RunStep("waiting", enginetest.Ok(nil))

	// The holder index was rebuilt: the remote worker may push logs, the
	// old in-process worker, whose step failed, may not.
	if err := f.Engine.CheckHolder(t.Context(), edge, job, "remote"); err != nil {
		t.Errorf("log push by the remote holder after restart: %v", err)
	}
	if err := f.Engine.CheckHolder(t.Context(), oldWorker, job, "local"); !errorsIs(err, engine.ErrConflict) {
		t.Errorf("log push for the failed in-process step = %v, want a conflict", err)
	}

	// The remote worker reports across the restart and the DAG moves on.
	if err := f.Engine.Heartbeat(t.Context(), edge, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CompleteStep(t.Context(), edge, job, "remote", enginetest.Ok(map[string]any{"v": 1})); err != nil {
		t.Fatalf("complete across restart: %v", err)
	}
	f.RunStep("after-remote", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobFailed)
}

func TestRestartGivesRemoteWorkersAFreshGraceAndRearmsTimers(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, `
tasks:
  slow:
    timeout: 10m
    flow:
      a: {type: script, script: "true", timeout: 5m}
  quiet:
    flow:
      a: {type: script, script: "true"}
`), enginetest.Options{HeartbeatTimeout: 90 * time.Second, NoWorker: true})
	edge := f.Register("edge", nil, false)
	slow := f.Execute("slow", nil)
	if c, _ := f.Engine.Claim(t.Context(), edge, 0); c == nil {
		t.Fatal("no claim")
	}
	if err := f.Engine.StartStep(t.Context(), edge, slow, "a"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(80 * time.Second)
	f.Restart()

	// 80s of silence before the restart do not count: the grace restarts.
	f.Clock.Advance(80 * time.Second)
	if s := f.Step(slow, "a"); s.Status != engine.StepRunning {
		t.Fatalf("a is %s within the fresh grace, want running", s.Status)
	}
	if err := f.Engine.Heartbeat(t.Context(), edge, nil); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(80 * time.Second)
	if err := f.Engine.Heartbeat(t.Context(), edge, nil); err != nil {
		t.Fatal(err)
	}
	// The step deadline (5m after the claim) survives the restart.
	f.Clock.Advance(5*time.Minute - 240*time.Second)
	s := f.WaitStep(slow, "a", engine.StepFailed)
	if deref(s.ErrorMessage) != "Step timed out after 300s" {
		t.Errorf("error_message = %q", deref(s.ErrorMessage))
	}
	quiet := f.Execute("quiet", nil)
	if c, _ := f.Engine.Claim(t.Context(), edge, 0); c == nil || c.JobID != quiet {
		t.Fatal("no claim of the quiet job")
	}
	if err := f.Engine.StartStep(t.Context(), edge, quiet, "a"); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	f.Clock.Advance(90 * time.Second)
	s = f.WaitStep(quiet, "a", engine.StepFailed)
	if deref(s.ErrorMessage) != "Worker heartbeat timeout (worker edge unresponsive)" {
		t.Errorf("error_message = %q", deref(s.ErrorMessage))
	}
}

func TestRestartRearmsTheTaskTimeout(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  t:
    timeout: 10m
    flow:
      a: {type: script, script: "true"}
`)
	job := f.Execute("t", nil)
	f.Clock.Advance(9 * time.Minute)
	f.Restart()
	if j := f.Job(job); j.Status != engine.JobPending {
		t.Fatalf("job is %s after restart, want pending", j.Status)
	}
	f.Clock.Advance(time.Minute)
	f.WaitStatus(job, engine.JobCancelled)
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, "job timed out after 600s; cancelled") {
		t.Errorf("server lines = %q", lines)
	}
}

func TestRestartFailsJobsWhoseWorkspaceIsGone(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.Workspaces.Remove(enginetest.WorkspaceName)
	f.Restart()

	j := f.WaitStatus(job, engine.JobFailed)
	if j.CompletedAt == nil {
		t.Error("abandoned job has no completed_at")
	}
	want := `job cannot resume: workspace "main" is no longer loaded`
	for name, s := range f.Steps(job) {
		if s.Status != engine.StepFailed || deref(s.ErrorMessage) != want {
			t.Errorf("%s = %s %q, want failed %q", name, s.Status, deref(s.ErrorMessage), want)
		}
	}
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, want) {
		t.Errorf("server lines = %q", lines)
	}
	if f.Logs.Finished(job) != 1 {
		t.Error("log of the abandoned job was not finished")
	}
}
