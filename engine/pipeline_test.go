package engine_test

import (
	"context"
	"errors"
	"fmt"
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

	created, release := createHeld(t, f)

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
	case r := <-created:
		t.Fatalf("create answered (%v) while its batch is held", r.err)
	default:
	}
	release()
	if r := <-created; r.err != nil {
		t.Fatal(r.err)
	}
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	if s := f.Step(job, "a"); s.Status != engine.StepCompleted || s.StartedAt == nil {
		t.Fatalf("a = %s (started %v), want completed with its start stored", s.Status, s.StartedAt)
	}
}

// An in-process worker's completion is answered once applied, as its
// start is: the worker goes on to its next step while the batch holding
// the result is written, and the result is stored with that batch.
func TestInProcessCompletionIsAnsweredBeforeItIsWritten(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.ClaimJobStep(job, "a")
	if err := f.Engine.StartStepApplied(t.Context(), f.Worker, job, "a"); err != nil {
		t.Fatal(err)
	}
	entered, hold := holdCommits(f)
	release := sync.OnceFunc(hold)
	defer release()
	if err := f.Engine.CompleteStepApplied(t.Context(), f.Worker, job, "a", enginetest.Ok(map[string]any{"v": 1})); err != nil {
		t.Fatalf("in-process completion: %v", err)
	}
	<-entered // the completion's batch (or the start's) is being written, and held there
	if err := f.Engine.CompleteStepApplied(t.Context(), f.Worker, job, "a", enginetest.Ok(nil)); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a second completion = %v, want refused as CompleteStep refuses it", err)
	}
	c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
	if err != nil || c == nil || c.StepName != "b" {
		t.Fatalf("claim while a's result is written = %+v, %v; want b", c, err)
	}
	release()
	f.Settle()
	if s := f.Step(job, "a"); s.Status != engine.StepCompleted || fmt.Sprint(s.Output) != "map[v:1]" {
		t.Fatalf("a = %s %v, want completed with its output stored", s.Status, s.Output)
	}
}

// A failed write that had accepted in-process starts stops the engine:
// reloaded from the store, it would hand those running steps out again.
// An in-process claim carries its step's start (see hand), answered from
// memory; the start report that lets the worker run it rides the batch
// after the claim's, answered once applied.
func TestFailedWriteAfterInProcessStartsStopsTheEngine(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	job := f.Execute("t", nil)
	f.Settle()
	disk := errors.New("disk full")
	entered, release := holdCommits(f)
	f.Store.FailNextCommit(disk)
	c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
	if err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("claim = %+v, %v; want a", c, err)
	}
	select {
	case <-entered: // the claim's batch, with a's start, is being written and held
	case <-time.After(10 * time.Second):
		t.Fatal("the claim's batch was not written: an in-process claim carries its step's start")
	}
	if err := f.Engine.StartStepApplied(t.Context(), f.Worker, job, "a"); err != nil {
		t.Fatalf("in-process start: %v", err)
	}
	release()
	err = f.RunEnded()
	if !errors.Is(err, disk) || !strings.Contains(err.Error(), "in-process step starts") {
		t.Fatalf("engine ended with %v, want the failed write named, and why it stopped", err)
	}
}

// A claim is answered from memory, even with a step of a job whose
// creation is still being written, so the step runs while it is: the
// worker's reports on that job are answered as for any job.
func TestStepOfAJobBeingCreatedRunsWhileItIsWritten(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	created, release := createHeld(t, f)

	c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
	if err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("claim while the job's creation is written = %+v, %v; want its step a", c, err)
	}
	if err := f.Engine.StartStepApplied(t.Context(), f.Worker, c.JobID, "a"); err != nil {
		t.Fatalf("in-process start: %v", err)
	}
	// What a worker's log push asks.
	if err := f.Engine.CheckHolder(t.Context(), f.Worker, c.JobID, "a"); err != nil {
		t.Fatalf("holder check: %v", err)
	}
	if cancelled, err := f.Engine.WaitCancelled(t.Context(), c.JobID, 0); err != nil || cancelled {
		t.Fatalf("cancelled? = %v, %v; want false", cancelled, err)
	}
	if err := f.Engine.AppendLog(c.JobID, []engine.LogLine{{Step: "a", Stream: "stdout", Line: "hi"}}); err != nil {
		t.Fatalf("log lines: %v", err)
	}
	// An `OUTPUT: ` line and a refused push read the stored job: they
	// wait for its write.
	queued := f.Engine.QueuedCommands()
	emitted := make(chan error, 1)
	go func() {
		_, _, err := f.Engine.Emit(context.Background(), c.JobID, "a", "", []engine.Emission{{JSON: `{"x": 1}`}})
		emitted <- err
	}()
	read := make(chan error, 1)
	waiting := func(n int) {
		f.Eventually(func() bool { return f.Engine.QueuedCommands() >= queued+n }, func() string {
			select {
			case err := <-emitted:
				return fmt.Sprintf("Emit did not wait for the write: %v", err)
			case err := <-read:
				return fmt.Sprintf("Job did not wait for the write: %v", err)
			default:
				return "never waiting"
			}
		})
	}
	waiting(1)
	go func() {
		_, _, err := f.Engine.Job(context.Background(), c.JobID)
		read <- err
	}()
	waiting(2)
	release()
	if r := <-created; r.err != nil || r.job.ID != c.JobID {
		t.Fatalf("created %+v, %v; claimed a step of %s", r.job, r.err, c.JobID)
	}
	if err := <-emitted; err != nil {
		t.Fatalf("an OUTPUT line of the step: %v", err)
	}
	if err := <-read; err != nil {
		t.Fatalf("reading the job: %v", err)
	}
}

// When the write creating a job fails, a remote worker that claimed one
// of its steps meanwhile is refused its start report (a remote start is
// answered once durable, and the reloaded engine has no such job): the
// step never runs.
func TestStepOfAJobWhoseCreationFailedIsRefusedItsStart(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}`))
	disk := errors.New("disk full")
	created, release := createHeld(t, f)
	f.Store.FailNextCommit(disk) // the held write, once released
	c, err := f.Engine.Claim(t.Context(), f.Worker, 0)
	if err != nil || c == nil {
		t.Fatalf("claim = %+v, %v", c, err)
	}
	release()
	if r := <-created; !errors.Is(r.err, disk) {
		t.Fatalf("create = %v, want the failed write", r.err)
	}
	if err := f.Engine.StartStep(t.Context(), f.Worker, c.JobID, "a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("start of a step of the job never stored = %v, want not found", err)
	}
	if _, err := f.Engine.WaitCancelled(t.Context(), c.JobID, 0); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("cancelled? of the job never stored: %v, want not found", err)
	}
}

type createResult struct {
	job *engine.Job
	err error
}

// createHeld creates a job of task t and returns once its batch is being
// written, held there until release (which the test's end calls too).
func createHeld(t *testing.T, f *enginetest.Fixture) (created <-chan createResult, release func()) {
	entered, hold := holdCommits(f)
	release = sync.OnceFunc(hold)
	t.Cleanup(release)
	ch := make(chan createResult, 1)
	go func() {
		j, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		ch <- createResult{j, err}
	}()
	<-entered
	return ch, release
}

// An in-process step starts with its claim (see hand), so its start
// report needs no commit of its own: along a chain run by the in-process
// pool, whose claims wait parked for the next step, each step's result
// and the next step's claim and start are one commit, where the start
// report made a second.
func TestInProcessStartsNeedNoCommitOfTheirOwn(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [b]}`))
	job := f.Execute("t", nil)
	f.Settle()
	claim := func() <-chan *engine.Claim {
		got := make(chan *engine.Claim, 1)
		go func() {
			c, err := f.Engine.Claim(t.Context(), f.Worker, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
		return got
	}
	before := f.Store.Commits()
	next := claim()
	for _, step := range []string{"a", "b", "c"} {
		if c := <-next; c == nil || c.StepName != step {
			t.Fatalf("claim = %+v, want %s", c, step)
		}
		if err := f.Engine.StartStepApplied(t.Context(), f.Worker, job, step); err != nil {
			t.Fatalf("start %s: %v", step, err)
		}
		f.Settle()
		stored := storedStep(t, f, job, step)
		if stored.Status != engine.StepRunning || stored.StartedAt == nil {
			t.Fatalf("stored %s = %s (started %v), want running with its start time", step, stored.Status, stored.StartedAt)
		}
		if step != "c" {
			next = claim()
			f.Eventually(func() bool { return f.Engine.ParkedClaims() == 1 }, func() string { return "claim never parked" })
		}
		if err := f.Engine.CompleteStepApplied(t.Context(), f.Worker, job, step, enginetest.Ok(nil)); err != nil {
			t.Fatalf("complete %s: %v", step, err)
		}
		f.Settle()
	}
	if j := f.Job(job); j.Status != engine.JobCompleted || j.StartedAt == nil {
		t.Fatalf("job = %s (started %v), want completed with its start stored", j.Status, j.StartedAt)
	}
	// a's claim and start (the job's start), then each result with the
	// next step's claim and start; the start reports made three more.
	if n := f.Store.Commits() - before; n != 4 {
		t.Errorf("%d commits for three steps, want 4", n)
	}
	for _, step := range []string{"a", "b", "c"} {
		if s := storedStep(t, f, job, step); s.StartedAt == nil || s.Unconfirmed {
			t.Errorf("stored %s: started %v, unconfirmed %v; want its start stored, confirmed", step, s.StartedAt, s.Unconfirmed)
		}
	}
}

// storedStep reads a step's record from the fixture's store.
func storedStep(t *testing.T, f *enginetest.Fixture, jobID, name string) *engine.Step {
	t.Helper()
	steps, err := f.Store.Steps(t.Context(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no stored step %q", name)
	return nil
}
