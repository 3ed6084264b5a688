package engine_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestConcurrentCreateJobsShareGroupCommits(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	const jobs = 200

	// Hold one commit so the callers queue up behind it, as they would
	// behind a slow fsync.
	entered, release := holdCommits(f)
	first := make(chan error, 1)
	go func() {
		_, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		first <- err
	}()
	<-entered
	before := f.Store.Commits()
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for range jobs {
		wg.Go(func() {
			_, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
			errs <- err
		})
	}
	f.Eventually(func() bool { return f.Engine.QueuedCommands() == jobs }, func() string { return "callers never queued" })
	release()
	wg.Wait()
	close(errs)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	commits := f.Store.Commits() - before
	if commits > 2 {
		t.Errorf("%d jobs took %d commits, want them grouped into at most 2", jobs, commits)
	}
	if _, total, _ := f.Engine.Jobs(t.Context(), engine.JobFilter{}); total != jobs+1 {
		t.Errorf("%d jobs stored, want %d", total, jobs+1)
	}
	t.Logf("%d concurrent CreateJob calls, %d commits", jobs, commits)
}

func TestFailedCommitIsReportedAndStateReloadedFromTheStore(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	claimAndStart(t, f, job, "a")

	disk := errors.New("disk full")
	f.Store.FailNextCommit(disk)
	err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "a", enginetest.Ok(nil))
	if !errors.Is(err, disk) {
		t.Fatalf("complete during a failed commit: err = %v, want %v", err, disk)
	}
	// Memory went back to the store's state: a is still running, held by
	// the (live) in-process worker, and b was never promoted.
	if got := f.StepStatuses(job); got["a"] != engine.StepRunning || got["b"] != engine.StepPending {
		t.Fatalf("after the failed commit: %v", got)
	}
	if err := f.Engine.CompleteStep(t.Context(), f.Worker, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatalf("retried complete: %v", err)
	}
	f.RunStep("b", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)

	f.Store.FailNextCommit(disk)
	if _, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"}); !errors.Is(err, disk) {
		t.Errorf("create during a failed commit: err = %v, want %v", err, disk)
	}
	if _, total, _ := f.Engine.Jobs(t.Context(), engine.JobFilter{}); total != 1 {
		t.Errorf("%d jobs stored, want only the first", total)
	}
}

// TestOneStepJobTakesAtMostThreeCommits is the durable-commit budget of a
// one-step job run by a worker one call at a time (no grouping to hide
// behind): the creation, the start report (which carries the claim) and
// the completion. The claim itself is answered from memory.
func TestOneStepJobTakesAtMostThreeCommits(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)), enginetest.Options{NoWorker: true})
	w := f.Register("edge", nil, false)
	const jobs = 5
	for range jobs {
		before := f.Store.Commits()
		job := f.Execute("t", nil)
		created := f.Store.Commits()
		c, err := f.Engine.Claim(t.Context(), w, 0)
		if err != nil || c == nil || c.JobID != job {
			t.Fatalf("claim = %+v, %v", c, err)
		}
		if n := f.Store.Commits() - created; n != 0 {
			t.Errorf("the claim took %d commits, want it answered from memory", n)
		}
		if err := f.Engine.StartStep(t.Context(), w, job, "a"); err != nil {
			t.Fatal(err)
		}
		if err := f.Engine.CompleteStep(t.Context(), w, job, "a", enginetest.Ok(nil)); err != nil {
			t.Fatal(err)
		}
		f.WaitStatus(job, engine.JobCompleted)
		if n := f.Store.Commits() - before; n > 3 {
			t.Errorf("a one-step job took %d commits, want at most 3 (create; claim+start; complete)", n)
		}
		if s := f.Step(job, "a"); s.Status != engine.StepCompleted || deref(s.WorkerID) != w || s.StartedAt == nil {
			t.Errorf("stored step = %s held by %s started %v", s.Status, deref(s.WorkerID), s.StartedAt)
		}
	}
}

// TestClaimLostInACrashLeavesTheStepReady: a claim is answered before it
// is durable. A crash before the start report loses it, which is safe: the
// step is ready again and the start report of the lost claim is refused,
// so the worker never runs it.
func TestClaimLostInACrashLeavesTheStepReady(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)),
		enginetest.Options{NoWorker: true, HeartbeatTimeout: time.Minute})
	edge := f.Register("edge", nil, false)
	job := f.Execute("t", nil)
	if c, err := f.Engine.Claim(t.Context(), edge, 0); err != nil || c == nil {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	f.Restart()
	if s := f.Step(job, "a"); s.Status != engine.StepReady || s.WorkerID != nil {
		t.Fatalf("after the crash a is %s held by %s, want ready", s.Status, deref(s.WorkerID))
	}
	if err := f.Engine.StartStep(t.Context(), edge, job, "a"); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("start of the lost claim: err = %v, want ErrConflict", err)
	}
	c, err := f.Engine.Claim(t.Context(), edge, 0)
	if err != nil || c == nil || c.JobID != job {
		t.Fatalf("claim again = %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), edge, job, "a"); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	if s := f.Step(job, "a"); s.Status != engine.StepRunning || deref(s.WorkerID) != edge || s.StartedAt == nil {
		t.Fatalf("after a started step's crash a is %s held by %s, want running held by %s", s.Status, deref(s.WorkerID), edge)
	}
}

// TestReportsNobodyWaitsOnLingerWhileStepsRun: while several steps run,
// in-process reports (answered once applied) wait for more before they are
// written, and the next command someone waits on takes them into its own
// commit; a lone running step's reports are written at once. The linger
// here is an hour, so a batch that lingered wrongly never gets written.
func TestReportsNobodyWaitsOnLingerWhileStepsRun(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`a: {action: ok}`)),
		enginetest.Options{NoWorker: true, Linger: time.Hour})
	w := f.Register("inproc", nil, true)
	claim := func(job string) {
		t.Helper()
		if c, err := f.Engine.Claim(t.Context(), w, 0); err != nil || c == nil || c.JobID != job {
			t.Fatalf("claim = %+v, %v; want job %s", c, err, job)
		}
	}

	// The store is read directly: the fixture's reads go through the loop
	// as commands someone waits on, which would end any lingering.
	stored := func(job string) string {
		steps, err := f.Store.Steps(t.Context(), job)
		if err != nil || len(steps) != 1 {
			t.Fatalf("stored steps of %s: %v, %v", job, steps, err)
		}
		return steps[0].Status
	}
	lone := f.Execute("t", nil)
	claim(lone)
	if err := f.Engine.StartStepApplied(t.Context(), w, lone, "a"); err != nil {
		t.Fatal(err)
	}
	f.Eventually(func() bool { return stored(lone) == engine.StepRunning },
		func() string { return "a lone step's start was never written" })
	if err := f.Engine.CompleteStepApplied(t.Context(), w, lone, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	f.Eventually(func() bool { return stored(lone) == engine.StepCompleted },
		func() string { return "a lone step's completion was never written" })

	jobs := []string{f.Execute("t", nil), f.Execute("t", nil), f.Execute("t", nil)}
	for _, job := range jobs {
		claim(job)
	}
	before := f.Store.Commits()
	for _, job := range jobs {
		if err := f.Engine.StartStepApplied(t.Context(), w, job, "a"); err != nil {
			t.Fatal(err)
		}
	}
	// A claim is answered in the loop's turn that takes it, after the turn
	// that decided whether the starts were written.
	if c, err := f.Engine.Claim(t.Context(), w, 0); err != nil || c != nil {
		t.Fatalf("claim with nothing ready = %+v, %v", c, err)
	}
	// The starts and the claim at least (other commands of the loop's own,
	// such as the lone job's clean-up, may have joined them).
	if n := f.Store.Commits() - before; n != 0 || f.Engine.QueuedCommands() < len(jobs)+1 {
		t.Fatalf("with %d steps running, %d commits and %d commands held; want the starts held, lingering", len(jobs), n, f.Engine.QueuedCommands())
	}
	if err := f.Engine.CompleteStep(t.Context(), w, jobs[0], "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	if n := f.Store.Commits() - before; n != 1 {
		t.Errorf("the starts and the awaited completion took %d commits, want 1", n)
	}
	for _, job := range jobs[1:] {
		if s := f.Step(job, "a"); s.Status != engine.StepRunning || s.StartedAt == nil {
			t.Errorf("stored step of %s is %s, want running: written with the completion", job, s.Status)
		}
	}
	f.WaitStatus(jobs[0], engine.JobCompleted)
}
