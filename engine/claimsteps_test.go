package engine_test

import (
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// TestClaimStepsTakesUpToMaxOldestFirst: a claim of several hands out the
// oldest ready steps, at most max, in one answer.
func TestClaimStepsTakesUpToMaxOldestFirst(t *testing.T) {
	f := enginetest.New(t, flowYAML(`a: {action: ok}`))
	jobs := []string{f.Execute("t", nil), f.Execute("t", nil), f.Execute("t", nil)}
	cs, err := f.Engine.ClaimSteps(t.Context(), f.Worker, 0, 2)
	if err != nil || len(cs) != 2 || cs[0].JobID != jobs[0] || cs[1].JobID != jobs[1] {
		t.Fatalf("claim of 2 = %+v, %v; want jobs %v", cs, err, jobs[:2])
	}
	cs, err = f.Engine.ClaimSteps(t.Context(), f.Worker, 0, 5)
	if err != nil || len(cs) != 1 || cs[0].JobID != jobs[2] {
		t.Fatalf("claim of 5 = %+v, %v; want job %s alone", cs, err, jobs[2])
	}
	if cs, err := f.Engine.ClaimSteps(t.Context(), f.Worker, 0, 5); err != nil || len(cs) != 0 {
		t.Fatalf("claim with nothing ready = %+v, %v; want none", cs, err)
	}
}

// TestClaimStepsIsDurableWhenAnswered: the claims of several survive a
// crash right after their answer, so the worker may run them before its
// start reports: after a restart the steps are still running, held by it,
// and their starts and completions are accepted.
func TestClaimStepsIsDurableWhenAnswered(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)),
		enginetest.Options{NoWorker: true, HeartbeatTimeout: time.Minute})
	edge := f.Register("edge", nil, false)
	jobs := []string{f.Execute("t", nil), f.Execute("t", nil)}
	cs, err := f.Engine.ClaimSteps(t.Context(), edge, 0, 4)
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim = %+v, %v", cs, err)
	}
	f.Restart()
	for _, job := range jobs {
		if s := f.Step(job, "a"); s.Status != engine.StepRunning || deref(s.WorkerID) != edge {
			t.Fatalf("after the crash %s/a is %s held by %s, want running held by edge", job, s.Status, deref(s.WorkerID))
		}
		if err := f.Engine.StartStep(t.Context(), edge, job, "a"); err != nil {
			t.Fatalf("start after the crash: %v", err)
		}
		if err := f.Engine.CompleteStep(t.Context(), edge, job, "a", enginetest.Ok(nil)); err != nil {
			t.Fatalf("complete after the crash: %v", err)
		}
	}
}

// TestParkedClaimStepsIsWokenByPromotionInTheSameCommit: a parked claim
// of several takes the step a completion promotes, in the completion's
// commit, and is answered with it alone.
func TestParkedClaimStepsIsWokenByPromotionInTheSameCommit(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.ClaimStep("a")
	poller := f.Register("poller", nil, false)
	got := make(chan []*engine.Claim, 1)
	go func() {
		cs, err := f.Engine.ClaimSteps(t.Context(), poller, time.Hour, 4)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })
	before := f.Store.Commits()
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	cs := <-got
	if len(cs) != 1 || cs[0].StepName != "b" {
		t.Fatalf("woken claim = %+v, want step b", cs)
	}
	if n := f.Store.Commits() - before; n != 1 {
		t.Errorf("complete + promote + durable claim took %d commits, want 1", n)
	}
}
