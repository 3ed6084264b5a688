package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// While a batch is being written, the loop goes on: a claim is answered
// and an in-process start accepted from memory, and a completion is
// applied but answered only once its own batch is durable, after the held
// one.
func TestLoopGoesOnWhileABatchIsWritten(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	job := f.Execute("t", nil)

	entered, hold := holdCommits(f)
	release := sync.OnceFunc(hold)
	defer release()
	created := make(chan error, 1)
	go func() {
		_, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		created <- err
	}()
	<-entered // the new job's batch is being written, and held there

	c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
	if err != nil || c == nil || c.JobID != job {
		t.Fatalf("claim while a batch is written = %+v, %v; want step a of %s", c, err, job)
	}
	if err := f.Engine.StartStepApplied(t.Context(), f.Worker, job, "a"); err != nil {
		t.Fatalf("in-process start while a batch is written: %v", err)
	}
	if err := f.Engine.StartStepApplied(t.Context(), "nobody", job, "a"); !errors.Is(err, engine.ErrNotFound) && !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("start by a stranger = %v, want refused as StartStep refuses it", err)
	}
	completed := make(chan error, 1)
	go func() {
		completed <- f.Engine.CompleteStep(context.Background(), f.Worker, job, "a", enginetest.Ok(nil))
	}()
	f.Eventually(func() bool { return f.Engine.QueuedCommands() >= 1 }, func() string { return "completion never applied" })
	select {
	case err := <-completed:
		t.Fatalf("completion answered (%v) before the batch before it was durable", err)
	case err := <-created:
		t.Fatalf("create answered (%v) while its batch is held", err)
	default:
	}
	release()
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	if s := f.Step(job, "a"); s.Status != engine.StepCompleted || s.StartedAt == nil {
		t.Fatalf("a = %s (started %v), want completed with its start stored", s.Status, s.StartedAt)
	}
}

// A failed write that had accepted in-process starts stops the engine:
// reloaded from the store, it would hand those running steps out again.
func TestFailedWriteAfterInProcessStartsStopsTheEngine(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	job := f.Execute("t", nil)
	f.ClaimJobStep(job, "a")
	disk := errors.New("disk full")
	f.Store.FailNextCommit(disk)
	if err := f.Engine.StartStepApplied(t.Context(), f.Worker, job, "a"); err != nil {
		t.Fatalf("in-process start: %v", err)
	}
	err := f.RunEnded()
	if !errors.Is(err, disk) || !strings.Contains(err.Error(), "in-process step starts") {
		t.Fatalf("engine ended with %v, want the failed write named, and why it stopped", err)
	}
}

// A claim is answered from memory, but not with a step of a job whose
// creation is still being written: a worker would report on a job that
// the store, the job's channels and its log do not know yet.
func TestClaimOfAJobBeingCreatedWaitsForItsWrite(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	entered, hold := holdCommits(f)
	release := sync.OnceFunc(hold)
	defer release()
	created := make(chan *engine.Job, 1)
	go func() {
		j, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		if err != nil {
			t.Error(err)
		}
		created <- j
	}()
	<-entered // the job's batch is being written, and held there

	claimed := make(chan *engine.Claim, 1)
	go func() {
		c, err := f.Engine.Claim(context.Background(), f.Worker, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		claimed <- c
	}()
	f.Eventually(func() bool { return f.Engine.QueuedCommands() >= 1 }, func() string { return "claim never applied" })
	select {
	case c := <-claimed:
		t.Fatalf("claim answered with %+v while its job's creation is being written", c)
	default:
	}
	release()
	j := <-created
	c := <-claimed
	if c == nil || c.JobID != j.ID || c.StepName != "a" {
		t.Fatalf("claim = %+v, want step a of %s", c, j.ID)
	}
	if cancelled, err := f.Engine.WaitCancelled(t.Context(), j.ID, 0); err != nil || cancelled {
		t.Fatalf("the claimed step's job, asked as a worker's log push asks: %v, %v", cancelled, err)
	}
}

// When the write creating a job fails, a claim held for one of its steps
// is answered with the error, and the step is nobody's: the job is not in
// the store, nor, reloaded, in memory.
func TestClaimHeldForAJobWhoseCreationFailedGetsTheError(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	disk := errors.New("disk full")
	entered, hold := holdCommits(f)
	release := sync.OnceFunc(hold)
	defer release()
	created := make(chan error, 1)
	go func() {
		_, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		created <- err
	}()
	<-entered
	f.Store.FailNextCommit(disk) // the held write, once released
	claimed := make(chan error, 1)
	go func() {
		_, err := f.Engine.Claim(context.Background(), f.Worker, 10*time.Second)
		claimed <- err
	}()
	f.Eventually(func() bool { return f.Engine.QueuedCommands() >= 1 }, func() string { return "claim never applied" })
	release()
	if err := <-created; !errors.Is(err, disk) {
		t.Fatalf("create = %v, want the failed write", err)
	}
	if err := <-claimed; !errors.Is(err, disk) {
		t.Fatalf("claim = %v, want the failed write", err)
	}
	if n := f.Engine.ReadySteps(); n != 0 {
		t.Fatalf("%d ready steps after the reload, want none", n)
	}
}
