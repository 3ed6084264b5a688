package engine_test

import (
	"errors"
	"sync"
	"testing"

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
	f.ClaimStep("a")

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
