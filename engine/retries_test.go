package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// waitRetry waits until a step is pending its retry and returns it.
func waitRetry(t *testing.T, f *enginetest.Fixture, job, step string) *engine.Step {
	t.Helper()
	var s *engine.Step
	f.Eventually(func() bool {
		s = f.Step(job, step)
		return s.Status == engine.StepPending && s.RetryAt != nil
	}, func() string { return step + " is " + s.Status + ", want pending with retry_at" })
	return s
}

func hasLine(lines []string, sub string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
}

func TestFailedAttemptIsRetriedAfterAGrowingDelay(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
flaky: {action: ok, retries: 2, retry_delay: 5s, retry_backoff: 3}
next: {action: ok, depends_on: [flaky]}`))
	job := f.Execute("t", nil)

	f.RunStep("flaky", enginetest.Fail(1, "Exit code: 1\nboom"))
	s := waitRetry(t, f, job, "flaky")
	if s.AttemptNumber() != 1 || !s.RetryAt.Equal(f.Clock.Now().Add(5*time.Second)) || deref(s.ErrorMessage) != "Exit code: 1\nboom" {
		t.Fatalf("after attempt 1: attempt %d retry_at %v error %q", s.AttemptNumber(), s.RetryAt, deref(s.ErrorMessage))
	}
	if st := f.Step(job, "next").Status; st != engine.StepPending {
		t.Fatalf("next is %s while flaky waits to retry, want pending", st)
	}
	if st := f.Job(job).Status; st != engine.JobRunning {
		t.Fatalf("job is %s while a step waits to retry, want running", st)
	}
	f.Clock.Advance(4 * time.Second)
	if st := f.Step(job, "flaky").Status; st != engine.StepPending {
		t.Fatalf("flaky is %s a second before its retry, want pending", st)
	}
	f.Clock.Advance(time.Second)
	s = f.WaitStep(job, "flaky", engine.StepReady)
	if s.AttemptNumber() != 2 || s.RetryAt != nil || s.ErrorMessage != nil {
		t.Fatalf("attempt 2 ready: attempt %d retry_at %v error %v", s.AttemptNumber(), s.RetryAt, s.ErrorMessage)
	}
	if lines := f.Logs.ServerLines(job); !slices.Contains(lines, "step \"flaky\" attempt 2 of 3 after: Exit code: 1\nboom") {
		t.Fatalf("server lines = %q, want the attempt 2 line", lines)
	}

	// The second delay is 5s * 3.
	f.RunStep("flaky", enginetest.Fail(1, "again"))
	s = waitRetry(t, f, job, "flaky")
	if !s.RetryAt.Equal(f.Clock.Now().Add(15 * time.Second)) {
		t.Fatalf("retry_at = %v, want now + 15s", s.RetryAt)
	}
	f.Clock.Advance(15 * time.Second)
	f.WaitStep(job, "flaky", engine.StepReady)
	f.RunStep("flaky", enginetest.Ok(map[string]any{"v": 3}))
	s = f.WaitStep(job, "flaky", engine.StepCompleted)
	if s.AttemptNumber() != 3 || s.ErrorMessage != nil {
		t.Fatalf("completed: attempt %d error %q", s.AttemptNumber(), deref(s.ErrorMessage))
	}
	f.RunStep("next", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
}

func TestStepFailsOnceItsRetriesAreSpent(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
flaky: {action: ok, retries: 1, retry_delay: 1s}
next: {action: ok, depends_on: [flaky]}`))
	job := f.Execute("t", nil)
	f.RunStep("flaky", enginetest.Exit(3))
	waitRetry(t, f, job, "flaky")
	f.Clock.Advance(time.Second)
	f.WaitStep(job, "flaky", engine.StepReady)
	f.RunStep("flaky", enginetest.Exit(4))
	s := f.WaitStep(job, "flaky", engine.StepFailed)
	if deref(s.ErrorMessage) != "Exit code: 4" || s.AttemptNumber() != 2 || s.RetryAt != nil {
		t.Fatalf("final: error %q attempt %d retry_at %v", deref(s.ErrorMessage), s.AttemptNumber(), s.RetryAt)
	}
	f.WaitStatus(job, engine.JobFailed)
	if st := f.Step(job, "next").Status; st != engine.StepSkipped {
		t.Errorf("next is %s, want skipped", st)
	}
}

func TestActionRetriesAreTheDefaultOfItsSteps(t *testing.T) {
	f := enginetest.New(t, `
actions:
  flaky: {type: script, script: "false", retries: 1, retry_delay: 2s}
tasks:
  t:
    flow:
      a: {action: flaky}
      b: {action: flaky, retries: 0}
`)
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Exit(1))
	f.RunStep("b", enginetest.Exit(1))
	if s := waitRetry(t, f, job, "a"); !s.RetryAt.Equal(f.Clock.Now().Add(2 * time.Second)) {
		t.Errorf("a retry_at = %v, want now + 2s (the action's delay)", s.RetryAt)
	}
	f.WaitStep(job, "b", engine.StepFailed)
}

func TestStepTimeoutIsRetriedOnceTheKillHadTime(t *testing.T) {
	f := enginetest.New(t, flowYAML(`slow: {action: ok, timeout: 30s, retries: 1, retry_delay: 1s}`))
	job := f.Execute("t", nil)
	f.ClaimStep("slow")
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, "slow"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(30 * time.Second)
	s := waitRetry(t, f, job, "slow")
	if deref(s.ErrorMessage) != "Step timed out after 30s" || s.WorkerID != nil || s.Deadline != nil {
		t.Fatalf("after the timeout: error %q worker %v deadline %v", deref(s.ErrorMessage), s.WorkerID, s.Deadline)
	}
	// Not after 1s: the worker's kill of the timed-out process has 15s.
	if !s.RetryAt.Equal(f.Clock.Now().Add(15 * time.Second)) {
		t.Fatalf("retry_at = %v, want now + 15s", s.RetryAt)
	}
	// The late report of the timed-out attempt is refused.
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "slow", enginetest.Ok(nil)); !errorsIs(err, engine.ErrConflict) {
		t.Errorf("complete of the timed-out attempt: err = %v, want ErrConflict", err)
	}
	f.Clock.Advance(15 * time.Second)
	f.WaitStep(job, "slow", engine.StepReady)
	if !hasLine(f.Logs.ServerLines(job), `attempt 2 of 2 after: Step timed out after 30s`) {
		t.Errorf("server lines = %q", f.Logs.ServerLines(job))
	}
	f.RunStep("slow", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
}

func TestLostWorkerStepIsRetriedOnAnother(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok, retries: 1, retry_delay: 1s}`)),
		enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	edge := f.Register("edge-1", nil, false)
	job := f.Execute("t", nil)
	if c, err := f.Engine.Claim(t.Context(), edge, 0); err != nil || c == nil {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), edge, job, "a"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(90 * time.Second)
	s := waitRetry(t, f, job, "a")
	if want := "Worker heartbeat timeout (worker edge-1 unresponsive)"; deref(s.ErrorMessage) != want {
		t.Fatalf("error %q, want %q", deref(s.ErrorMessage), want)
	}
	other := f.Register("edge-2", nil, false)
	f.Clock.Advance(time.Second)
	f.WaitStep(job, "a", engine.StepReady)
	c, err := f.Engine.Claim(t.Context(), other, 0)
	if err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("claim by edge-2 = %+v, %v", c, err)
	}
	if err := f.Engine.CompleteStep(t.Context(), other, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobCompleted)
}

func TestInProcessStepLostInARestartIsRetried(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok, retries: 1, retry_delay: 1s}`))
	job := f.Execute("t", nil)
	claimAndStart(t, f, job, "a")
	f.Restart()
	s := waitRetry(t, f, job, "a")
	if !strings.HasPrefix(deref(s.ErrorMessage), "Worker heartbeat timeout") {
		t.Fatalf("error %q", deref(s.ErrorMessage))
	}
	f.Clock.Advance(time.Second)
	f.WaitStep(job, "a", engine.StepReady)
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
}

func TestRetryScheduledBeforeARestartHappensAfterIt(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok, retries: 1, retry_delay: 1m}`))
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Exit(1))
	at := *waitRetry(t, f, job, "a").RetryAt
	f.Clock.Advance(30 * time.Second)
	f.Restart()
	s := f.Step(job, "a")
	if s.Status != engine.StepPending || s.RetryAt == nil || !s.RetryAt.Equal(at) {
		t.Fatalf("after restart: %s retry_at %v, want pending until %v", s.Status, s.RetryAt, at)
	}
	f.WaitTimers(1)
	f.Clock.Advance(30 * time.Second)
	f.WaitStep(job, "a", engine.StepReady)
	f.RunStep("a", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
}

func TestCancelDuringARetryWaitEndsTheStep(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok, retries: 3, retry_delay: 10s}`))
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Exit(1))
	waitRetry(t, f, job, "a")
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobCancelled)
	f.Clock.Advance(time.Minute)
	f.Settle()
	if s := f.Step(job, "a"); s.Status != engine.StepCancelled || s.RetryAt != nil {
		t.Errorf("a is %s retry_at %v after cancel, want cancelled without retry_at", s.Status, s.RetryAt)
	}
	if f.Clock.Pending() != 0 {
		t.Errorf("%d timers left after cancel", f.Clock.Pending())
	}
}

func TestJobTimeoutIsNotRetried(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  t:
    timeout: 1m
    flow:
      a: {type: script, script: "true", retries: 3, retry_delay: 1s}
`)
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	f.Clock.Advance(time.Minute)
	f.WaitStatus(job, engine.JobCancelled)
	if s := f.Step(job, "a"); s.Status != engine.StepCancelled || s.AttemptNumber() != 1 {
		t.Errorf("a is %s attempt %d, want cancelled on attempt 1", s.Status, s.AttemptNumber())
	}
	if hasLine(f.Logs.ServerLines(job), "retrying") {
		t.Errorf("server lines mention a retry: %q", f.Logs.ServerLines(job))
	}
}

func TestServerSideFailuresAreNotRetried(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
bad-when: {action: ok, when: "{{ input.nope.deeper }}", retries: 3}
bad-input: {action: greet, input: {name: "{{ nothing.here }}"}, retries: 3}`))
	job := f.Execute("t", nil)
	f.WaitStatus(job, engine.JobFailed)
	for _, name := range []string{"bad-when", "bad-input"} {
		if s := f.Step(job, name); s.Status != engine.StepFailed || s.RetryAt != nil || s.AttemptNumber() != 1 {
			t.Errorf("%s is %s attempt %d retry_at %v, want failed at once", name, s.Status, s.AttemptNumber(), s.RetryAt)
		}
	}
}

func TestForEachInstancesRetryOneByOne(t *testing.T) {
	f := enginetest.New(t, flowYAML(`items: {action: ok, for_each: [x, y], retries: 1, retry_delay: 1s}`))
	job := f.Execute("t", nil)
	f.RunStep("items[0]", enginetest.Exit(1))
	f.RunStep("items[1]", enginetest.Ok(map[string]any{"i": 1}))
	waitRetry(t, f, job, "items[0]")
	if s := f.Step(job, "items[1]"); s.Status != engine.StepCompleted || s.AttemptNumber() != 1 {
		t.Fatalf("items[1] is %s attempt %d, want completed on its first attempt", s.Status, s.AttemptNumber())
	}
	if st := f.Step(job, "items").Status; st != engine.StepRunning {
		t.Fatalf("parent is %s while an instance waits to retry, want running", st)
	}
	f.Clock.Advance(time.Second)
	f.WaitStep(job, "items[0]", engine.StepReady)
	f.RunStep("items[0]", enginetest.Ok(map[string]any{"i": 0}))
	p := f.WaitStep(job, "items", engine.StepCompleted)
	if out, ok := p.Output.([]any); !ok || len(out) != 2 {
		t.Fatalf("parent output %v", p.Output)
	}
	f.WaitStatus(job, engine.JobCompleted)
}

func TestHooksSeeOnlyTheFinalOutcome(t *testing.T) {
	f := enginetest.New(t, strings.Replace(hookYAML, "        script: make\n", "        script: make\n        retries: 1\n        retry_delay: 1s\n", 1))
	job := f.Execute("build", nil)
	f.RunStep("lint", enginetest.Ok(nil))
	f.RunStep("compile", enginetest.Fail(2, "flaky"))
	waitRetry(t, f, job, "compile")
	if hooks := hookJobs(t, f, job); len(hooks) != 0 {
		t.Fatalf("hooks fired on a failed attempt: %+v", hooks)
	}
	f.Clock.Advance(time.Second)
	f.WaitStep(job, "compile", engine.StepReady)
	f.RunStep("compile", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)
	f.Eventually(func() bool { return len(hookJobs(t, f, job)) == 2 }, func() string { return "want the two on_success hook jobs" })
	for _, h := range hookJobs(t, f, job) {
		if msg, _ := h.Input["message"].(string); h.TaskName == "notify" && !strings.HasPrefix(msg, "build completed") {
			t.Errorf("a hook saw another outcome: %q", msg)
		}
	}
}
