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

// TestClaimStepsIsDurableWhenAnswered: the claims of several start their
// steps and survive a crash right after their answer, so the worker runs
// them at once: after a restart the steps are still running, started,
// held by it, and a start report and the completions are accepted.
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
		if s := f.Step(job, "a"); s.Status != engine.StepRunning || deref(s.WorkerID) != edge || s.StartedAt == nil {
			t.Fatalf("after the crash %s/a is %s held by %s started %v, want running, started, held by edge", job, s.Status, deref(s.WorkerID), s.StartedAt)
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

// TestHeartbeatPutsBackAClaimOfSeveralTheWorkerNeverGot: a step a claim of
// several started, whose answer never reached the worker (its heartbeats
// do not name it), is ready again for any worker, as an unstarted claim;
// once a heartbeat named it, it is the worker's like any started step.
func TestHeartbeatPutsBackAClaimOfSeveralTheWorkerNeverGot(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	remote := f.Register("edge-1", nil, false)
	job := f.Execute("t", nil)
	if cs, err := f.Engine.ClaimSteps(t.Context(), remote, 0, 2); err != nil || len(cs) != 2 {
		t.Fatalf("claim = %+v, %v", cs, err)
	}
	named := []engine.StepRef{{JobID: job, Step: "b"}}
	f.Clock.Advance(31 * time.Second)
	if err := f.Engine.Heartbeat(t.Context(), remote, named); err != nil {
		t.Fatal(err)
	}
	if a := f.Step(job, "a"); a.Status != engine.StepReady || a.WorkerID != nil || a.StartedAt != nil {
		t.Errorf("a (claimed, never named) = %s held by %v started %v, want ready again", a.Status, a.WorkerID, a.StartedAt)
	}
	if b := f.Step(job, "b"); b.Status != engine.StepRunning || b.StartedAt == nil {
		t.Errorf("b (named) = %s started %v, want running", b.Status, b.StartedAt)
	}
	// b was named: no longer put back, but failed, if a later heartbeat
	// leaves it out.
	if err := f.Engine.Heartbeat(t.Context(), remote, []engine.StepRef{}); err != nil {
		t.Fatal(err)
	}
	if b := f.Step(job, "b"); b.Status != engine.StepFailed {
		t.Errorf("b (named, then left out) = %s, want failed", b.Status)
	}
}

// TestClaimOfSeveralLostInACrashIsPutBackAfterTheRestart: the server dies
// between a claim of several's commit and its answer (the steps are
// started in the store, the worker never got them); after the restart the
// worker's first heartbeat, which does not name them, puts them back to
// ready as it would before the crash, rather than failing steps that never
// ran. One the worker named before the crash is its own across the restart.
func TestClaimOfSeveralLostInACrashIsPutBackAfterTheRestart(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	edge := f.Register("edge", nil, false)
	job := f.Execute("t", nil)
	if cs, err := f.Engine.ClaimSteps(t.Context(), edge, 0, 2); err != nil || len(cs) != 2 {
		t.Fatalf("claim = %+v, %v", cs, err)
	}
	if err := f.Engine.Heartbeat(t.Context(), edge, []engine.StepRef{{JobID: job, Step: "b"}}); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	if err := f.Engine.Heartbeat(t.Context(), edge, []engine.StepRef{{JobID: job, Step: "b"}}); err != nil {
		t.Fatal(err)
	}
	if a := f.Step(job, "a"); a.Status != engine.StepReady || a.WorkerID != nil || a.StartedAt != nil {
		t.Errorf("a (claimed, answer lost in the crash) = %s held by %v started %v %q, want ready again", a.Status, a.WorkerID, a.StartedAt, deref(a.ErrorMessage))
	}
	if b := f.Step(job, "b"); b.Status != engine.StepRunning || deref(b.WorkerID) != edge {
		t.Errorf("b (named before the crash) = %s held by %s, want running on edge", b.Status, deref(b.WorkerID))
	}
	if err := f.Engine.Heartbeat(t.Context(), edge, []engine.StepRef{}); err != nil {
		t.Fatal(err)
	}
	if b := f.Step(job, "b"); b.Status != engine.StepFailed {
		t.Errorf("b (named, then left out after the restart) = %s, want failed", b.Status)
	}
}

// TestClaimStepsReportingIsOneCommit: a claim carrying results records
// them and claims in one commit; the step a result made ready is among
// those claimed; a result for a step the worker does not hold is refused
// on its own, leaving the rest be.
func TestClaimStepsReportingIsOneCommit(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: time.Minute})
	edge := f.Register("edge", nil, false)
	job := f.Execute("t", nil)
	if cs, err := f.Engine.ClaimSteps(t.Context(), edge, 0, 4); err != nil || len(cs) != 1 || cs[0].StepName != "a" {
		t.Fatalf("claim = %+v, %v; want a", cs, err)
	}
	before := f.Store.Commits()
	errs, cs, err := f.Engine.ClaimStepsReporting(t.Context(), edge, []engine.StepReport{
		{JobID: job, Step: "a", Result: enginetest.Ok(map[string]any{"v": 1})},
		{JobID: job, Step: "b", Result: enginetest.Ok(nil)}, // not held: b is not even ready yet
	}, 4)
	if err != nil || len(errs) != 2 || errs[0] != nil || !errorsIs(errs[1], engine.ErrConflict) {
		t.Fatalf("results answered %v, %v; want a taken, b refused as a conflict", errs, err)
	}
	if len(cs) != 1 || cs[0].StepName != "b" {
		t.Fatalf("claimed %+v, want b, which a's result made ready", cs)
	}
	if n := f.Store.Commits() - before; n != 1 {
		t.Errorf("results and claim took %d commits, want 1", n)
	}
	if a := f.Step(job, "a"); a.Status != engine.StepCompleted {
		t.Errorf("a is %s, want completed", a.Status)
	}
	if b := f.Step(job, "b"); b.Status != engine.StepRunning || deref(b.WorkerID) != edge || b.StartedAt == nil {
		t.Errorf("b is %s held by %s started %v, want running on edge, started", b.Status, deref(b.WorkerID), b.StartedAt)
	}
	// Nothing ready: the claim answers at once, with the results.
	errs, cs, err = f.Engine.ClaimStepsReporting(t.Context(), edge, []engine.StepReport{{JobID: job, Step: "b", Result: enginetest.Ok(nil)}}, 4)
	if err != nil || errs[0] != nil || len(cs) != 0 {
		t.Fatalf("last result: %v %v, claimed %+v; want taken, nothing claimed", errs, err, cs)
	}
	f.WaitStatus(job, engine.JobCompleted)
}

// TestAReportingClaimTakesTheStepItsResultMadeReadyBeforeTheWorkersParkedClaim:
// a worker with a claim waiting for work (its idle slots) reports a result
// with another claim (the slot that ran the step): the step the result
// makes ready goes to the reporting claim, in its commit, not to the
// parked claim, which would leave the reporting one empty and cost the
// worker a second request. What the reporting claim leaves (it asked for
// one; two were made ready) still goes to the parked claim at once.
func TestAReportingClaimTakesTheStepItsResultMadeReadyBeforeTheWorkersParkedClaim(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [a]}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: time.Minute})
	edge := f.Register("edge", nil, false)
	job := f.Execute("t", nil)
	if cs, err := f.Engine.ClaimSteps(t.Context(), edge, 0, 1); err != nil || len(cs) != 1 || cs[0].StepName != "a" {
		t.Fatalf("claim = %+v, %v; want a", cs, err)
	}
	parked := make(chan []*engine.Claim, 1)
	go func() {
		cs, err := f.Engine.ClaimSteps(t.Context(), edge, time.Hour, 3)
		if err != nil {
			t.Error(err)
		}
		parked <- cs
	}()
	f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })
	errs, cs, err := f.Engine.ClaimStepsReporting(t.Context(), edge, []engine.StepReport{{JobID: job, Step: "a", Result: enginetest.Ok(nil)}}, 1)
	if err != nil || errs[0] != nil {
		t.Fatalf("result answered %v, %v", errs, err)
	}
	if len(cs) != 1 || cs[0].StepName != "b" {
		t.Fatalf("the reporting claim got %+v; want b, the first step a's result made ready", cs)
	}
	select {
	case cs := <-parked:
		if len(cs) != 1 || cs[0].StepName != "c" {
			t.Fatalf("the parked claim got %+v; want c, which the reporting claim left", cs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked claim did not get the step the reporting claim left")
	}
}
