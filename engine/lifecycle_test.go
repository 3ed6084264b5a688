package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestCancelJobCancelsPendingReadyAndRunningSteps(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
running: {action: ok}
ready: {action: ok}
pending: {action: ok, depends_on: [running]}`))
	job := f.Execute("t", nil)
	f.ClaimStep("running")
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, "running"); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobRunning)

	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	j := f.Job(job)
	if j.Status != engine.JobCancelled || j.CompletedAt == nil {
		t.Errorf("job = %s (completed_at %v), want cancelled", j.Status, j.CompletedAt)
	}
	for name, status := range f.StepStatuses(job) {
		if status != engine.StepCancelled {
			t.Errorf("%s is %s, want cancelled", name, status)
		}
	}
	if got, err := f.Engine.WaitCancelled(t.Context(), job, 0); err != nil || !got {
		t.Errorf("WaitCancelled = %v, %v; want true", got, err)
	}
	err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "running", enginetest.Ok(nil))
	if !errorsIs(err, engine.ErrConflict) {
		t.Errorf("late complete: err = %v, want ErrConflict", err)
	}
	if err := f.Engine.CancelJob(t.Context(), job); !errorsIs(err, engine.ErrConflict) {
		t.Errorf("second cancel: err = %v, want ErrConflict", err)
	}
	if err := f.Engine.CancelJob(t.Context(), "0190d7a4-0000-7000-8000-000000000000"); !errorsIs(err, engine.ErrNotFound) {
		t.Errorf("unknown job: err = %v, want ErrNotFound", err)
	}
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, "job cancelled") {
		t.Errorf("server lines = %q, want %q", lines, "job cancelled")
	}
	if c, err := f.Engine.Claim(t.Context(), f.Worker, 0); c != nil || err != nil {
		t.Errorf("claim after cancel = %+v, %v; want no work", c, err)
	}
	if f.Logs.Finished(job) != 1 {
		t.Error("log of the cancelled job was not finished")
	}
}

func TestWaitCancelledWakesWhenTheJobIsCancelled(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	got := make(chan bool, 1)
	go func() {
		c, err := f.Engine.WaitCancelled(t.Context(), job, time.Hour)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if !<-got {
		t.Error("WaitCancelled returned false for a cancelled job")
	}
}

func TestWaitCancelledReturnsFalseWhenTheWaitEnds(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	job := f.Execute("t", nil)
	pending := f.Clock.Pending()
	got := make(chan bool, 1)
	go func() {
		c, _ := f.Engine.WaitCancelled(t.Context(), job, 30*time.Second)
		got <- c
	}()
	f.WaitTimers(pending + 1)
	f.Clock.Advance(30 * time.Second)
	if <-got {
		t.Error("WaitCancelled = true for a job nobody cancelled")
	}
}

func TestOnCancelledCallsBackWhenTheJobIsCancelled(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok}`))
	job := f.Execute("t", nil)
	called := make(chan string, 2)
	watch := func(name string) func() bool {
		stop, err := f.Engine.OnCancelled(t.Context(), job, func() { called <- name })
		if err != nil {
			t.Fatal(err)
		}
		return stop
	}
	watch("kept")
	if stop := watch("stopped"); !stop() {
		t.Error("stop before the cancellation = false, want true")
	}
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if got := <-called; got != "kept" {
		t.Errorf("called back %q, want the watch not stopped", got)
	}
	// A watch begun once the job is cancelled is called back at once.
	watch("late")
	if got := <-called; got != "late" {
		t.Errorf("called back %q, want the late watch", got)
	}

	done := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(nil))
	f.RunStep("b", enginetest.Ok(nil))
	f.WaitStatus(done, engine.JobCompleted)
	stop, err := f.Engine.OnCancelled(t.Context(), done, func() { called <- "completed" })
	if err != nil || !stop() {
		t.Errorf("watch of a completed job: stop = %v, err = %v; want true, nil", stop != nil && stop(), err)
	}
	if _, err := f.Engine.OnCancelled(t.Context(), "0190d7a4-0000-7000-8000-000000000000", func() {}); !errorsIs(err, engine.ErrNotFound) {
		t.Errorf("unknown job: err = %v, want ErrNotFound", err)
	}
	select {
	case got := <-called:
		t.Errorf("called back %q, want nothing more", got)
	default:
	}
}

func TestJobDoneClosesWhenTheJobEnds(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	job := f.Execute("t", nil)
	done, err := f.Engine.JobDone(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("done before the job ended")
	default:
	}
	f.RunStep("a", enginetest.Ok(nil))
	<-done
	if j := f.Job(job); j.Status != engine.JobCompleted {
		t.Errorf("job is %s once done, want completed", j.Status)
	}
	again, err := f.Engine.JobDone(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	<-again
	if _, err := f.Engine.JobDone(t.Context(), "nope"); !errorsIs(err, engine.ErrNotFound) {
		t.Errorf("unknown job: err = %v, want ErrNotFound", err)
	}
}

func TestStepTimeoutFailsTheStepAndSkipsDependents(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
slow: {action: ok, timeout: 30s}
next: {action: ok, depends_on: [slow]}`))
	job := f.Execute("t", nil)
	c := f.ClaimStep("slow")
	if c.Timeout != 30*time.Second {
		t.Errorf("claim timeout = %v, want 30s", c.Timeout)
	}
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, "slow"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(29 * time.Second)
	if s := f.Step(job, "slow"); s.Status != engine.StepRunning {
		t.Fatalf("slow is %s before its deadline, want running", s.Status)
	}
	f.Clock.Advance(time.Second)
	s := f.WaitStep(job, "slow", engine.StepFailed)
	if deref(s.ErrorMessage) != "Step timed out after 30s" {
		t.Errorf("error_message = %q", deref(s.ErrorMessage))
	}
	f.WaitStatus(job, engine.JobFailed)
	if st := f.Step(job, "next").Status; st != engine.StepSkipped {
		t.Errorf("next is %s, want skipped", st)
	}
	if lines := f.Logs.ServerLines(job); len(lines) == 0 || !strings.Contains(lines[0], "Step timed out after 30s") {
		t.Errorf("server lines = %q", lines)
	}
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "slow", enginetest.Ok(nil)); !errorsIs(err, engine.ErrConflict) {
		t.Errorf("complete after timeout: err = %v, want ErrConflict", err)
	}
}

func TestCompletedStepStopsItsTimeout(t *testing.T) {
	f := enginetest.New(t, flowYAML(`quick: {action: ok, timeout: 30s}`))
	job := f.Execute("t", nil)
	f.RunStep("quick", enginetest.Ok(nil))
	f.Clock.Advance(time.Minute)
	f.WaitStatus(job, engine.JobCompleted)
	if f.Clock.Pending() != 0 {
		t.Errorf("%d timers left pending after the job ended", f.Clock.Pending())
	}
}

func TestTaskTimeoutCancelsTheJob(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  t:
    timeout: 1m
    flow:
      a: {type: script, script: "true"}
      b: {type: script, script: "true", depends_on: [a]}
`)
	job := f.Execute("t", nil)
	if j := f.Job(job); j.Deadline == nil || !j.Deadline.Equal(enginetest.Epoch.Add(time.Minute)) {
		t.Fatalf("deadline = %v, want created + 1m", j.Deadline)
	}
	f.ClaimStep("a")
	f.Clock.Advance(time.Minute)
	f.WaitStatus(job, engine.JobCancelled)
	if got := f.StepStatuses(job); got["a"] != engine.StepCancelled || got["b"] != engine.StepCancelled {
		t.Errorf("steps = %v, want all cancelled", got)
	}
	if ok, _ := f.Engine.WaitCancelled(t.Context(), job, 0); !ok {
		t.Error("WaitCancelled = false after the task timeout")
	}
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, "job timed out after 60s; cancelled") {
		t.Errorf("server lines = %q", lines)
	}
}

func TestJobWithEveryStepSkippedCompletesAtCreation(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok, when: "false"}`))
	j, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != engine.JobCompleted {
		t.Errorf("CreateJob returned status %s, want completed", j.Status)
	}
	done, err := f.Engine.JobDone(t.Context(), j.ID)
	if err != nil {
		t.Fatal(err)
	}
	<-done
}

func TestStrictJobRejectsUndeclaredInputKeys(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  greet:
    input:
      name: {type: string}
      seconds: {type: integer}
    flow:
      say: {type: script, script: "true"}
`)
	req := engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "greet", Input: map[string]any{"nmae": "Ada"}, Strict: true}
	_, err := f.Engine.CreateJob(t.Context(), req)
	if !errorsIs(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `input "nmae": unknown (declared: name, seconds)`) {
		t.Fatalf("strict job with a typo: %v", err)
	}
	// Input the server builds (a webhook's body, a trigger's input) is not strict.
	req.Strict = false
	j, err := f.Engine.CreateJob(t.Context(), req)
	if err != nil || j.Input["nmae"] != "Ada" {
		t.Fatalf("lenient job: %v, input %v", err, j)
	}
}
