package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func TestRecordsRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	done := t0.Add(time.Minute)
	job := &engine.Job{
		ID: "j1", Workspace: "ws", TaskName: "deploy", Mode: "distributed",
		Status: engine.JobRunning, SourceType: engine.SourceTrigger, SourceID: ptr("nightly"),
		Revision: "rev1", Input: map[string]any{"env": "prod", "n": float64(3)},
		Output:      map[string]any{"sink": map[string]any{"ok": true}},
		ParentJobID: "j0", ParentStep: "call", Depth: 1,
		CreatedAt: t0, StartedAt: ptr(t0.Add(time.Second)), Deadline: ptr(t0.Add(time.Hour)),
	}
	step := &engine.Step{
		JobID: "j1", Name: "build[2]", FlowStep: "build", Index: 2, Seq: 3,
		ActionName: "compile", ActionType: "script", Runner: "docker",
		Input: map[string]any{"x": "y"}, Output: []any{"a", float64(1)},
		Status: engine.StepFailed, WorkerID: ptr("w1"),
		ReadyAt: ptr(t0), StartedAt: ptr(t0.Add(time.Second)), CompletedAt: &done,
		ErrorMessage: ptr("Exit code: 1"), RequiredTags: []string{"docker", "gpu"},
		Deadline: ptr(t0.Add(time.Hour)),
	}
	worker := &engine.Worker{
		ID: "w1", Name: "box", Tags: []string{"docker"}, Status: engine.WorkerActive,
		LastSeen: t0.Add(time.Minute), RegisteredAt: t0,
		SecretSHA256: strings.Repeat("5e", 32),
	}
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}, Steps: []*engine.Step{step}, Workers: []*engine.Worker{worker}})

	gotJob, err := db.Job(ctx, "j1")
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if !reflect.DeepEqual(gotJob, job) {
		t.Errorf("job round trip:\n got %+v\nwant %+v", gotJob, job)
	}
	gotSteps, err := db.Steps(ctx, "j1")
	if err != nil {
		t.Fatalf("Steps: %v", err)
	}
	if len(gotSteps) != 1 || !reflect.DeepEqual(gotSteps[0], step) {
		t.Errorf("step round trip:\n got %+v\nwant %+v", gotSteps, step)
	}
	gotWorker, err := db.Worker(ctx, "w1")
	if err != nil {
		t.Fatalf("Worker: %v", err)
	}
	if !reflect.DeepEqual(gotWorker, worker) {
		t.Errorf("worker round trip:\n got %+v\nwant %+v", gotWorker, worker)
	}
}

func TestCommitDoesNotAliasBatchRecords(t *testing.T) {
	db, _ := openTemp(t)
	job := newJob("j1", "ws", "t", 0)
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	job.Status = engine.JobFailed
	job.Input["n"] = "changed"

	got, err := db.Job(context.Background(), "j1")
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if got.Status != engine.JobPending || got.Input["n"] != float64(0) {
		t.Errorf("stored job changed with the caller's record: %+v", got)
	}
}

func TestUnknownRecordsAreNotFound(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if _, err := db.Job(ctx, "nope"); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Job(nope) error = %v, want ErrNotFound naming the id", err)
	}
	if _, err := db.Worker(ctx, "ghost"); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("Worker(ghost) error = %v, want ErrNotFound naming the id", err)
	}
	steps, err := db.Steps(ctx, "nope")
	if err != nil || len(steps) != 0 {
		t.Errorf("Steps(nope) = %v, %v; want none", steps, err)
	}
}

func TestStepsAreOrderedBySeqNotName(t *testing.T) {
	db, _ := openTemp(t)
	b := &engine.Batch{Jobs: []*engine.Job{newJob("j1", "ws", "t", 0), newJob("j10", "ws", "t", 1)}}
	// j10 shares j1's prefix: its steps must not leak into j1's scan.
	for i, name := range []string{"zeta", "alpha", "mid", "b", "a"} {
		b.Steps = append(b.Steps, newStep("j1", name, i*7))
	}
	b.Steps = append(b.Steps, newStep("j10", "other", 0))
	commit(t, db, b)

	steps, err := db.Steps(context.Background(), "j1")
	if err != nil {
		t.Fatalf("Steps: %v", err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	if want := []string{"zeta", "alpha", "mid", "b", "a"}; !reflect.DeepEqual(names, want) {
		t.Errorf("steps = %v, want %v", names, want)
	}
}

func TestCommitRejectsBadRecordsAndWritesNothing(t *testing.T) {
	tests := []struct {
		name  string
		batch *engine.Batch
	}{
		{"job without id", &engine.Batch{Jobs: []*engine.Job{{Workspace: "ws"}}}},
		{"workspace with NUL", &engine.Batch{Jobs: []*engine.Job{newJob("j", "w\x00s", "t", 0)}}},
		{"step without name", &engine.Batch{Steps: []*engine.Step{newStep("j", "", 0)}}},
		{"step without job", &engine.Batch{Steps: []*engine.Step{newStep("", "s", 0)}}},
		{"worker without id", &engine.Batch{Workers: []*engine.Worker{{Name: "w"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := openTemp(t)
			ok := newJob("good", "ws", "t", 0)
			tt.batch.Jobs = append([]*engine.Job{ok}, tt.batch.Jobs...)
			err := db.Commit(context.Background(), tt.batch)
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("Commit error = %v, want ErrInvalid", err)
			}
			if _, err := db.Job(context.Background(), "good"); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("a rejected batch was partly written: Job(good) err = %v", err)
			}
		})
	}
}

func TestCommitOfNilOrEmptyBatchIsANoOp(t *testing.T) {
	db, _ := openTemp(t)
	for _, b := range []*engine.Batch{nil, {}, {Jobs: []*engine.Job{nil}}} {
		if err := db.Commit(context.Background(), b); err != nil {
			t.Errorf("Commit(%+v) = %v", b, err)
		}
	}
}

func TestCancelledContextStopsCommitAndReads(t *testing.T) {
	db, _ := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{newJob("j", "ws", "t", 0)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Commit error = %v, want context.Canceled", err)
	}
	if _, err := db.Job(ctx, "j"); !errors.Is(err, context.Canceled) {
		t.Errorf("Job error = %v, want context.Canceled", err)
	}
}

func TestReopenKeepsRecordsIndexesAndCounts(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	ids := seedJobs(t, db, 10)
	done := newJob(ids[4], "alpha", "test", 4)
	done.Status = engine.JobCompleted
	commit(t, db, &engine.Batch{
		Jobs:    []*engine.Job{done},
		Steps:   []*engine.Step{newStep(ids[9], "s", 0)},
		Workers: []*engine.Worker{{ID: "w1", RegisteredAt: t0}},
	})
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db2.Close()
	jobs, total, err := db2.Jobs(ctx, engine.JobFilter{Workspace: "alpha"})
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	if want := []string{"job-008", "job-006", "job-004", "job-002", "job-000"}; total != 5 || !reflect.DeepEqual(jobIDs(jobs), want) {
		t.Errorf("alpha jobs after reopen = %v (total %d), want %v (5)", jobIDs(jobs), total, want)
	}
	active, steps, workers, err := db2.LoadActive(ctx)
	if err != nil {
		t.Fatalf("LoadActive: %v", err)
	}
	if len(active) != 9 || len(steps) != 1 || len(workers) != 1 {
		t.Errorf("after reopen: %d active jobs, %d steps, %d workers; want 9, 1, 1", len(active), len(steps), len(workers))
	}
}

func TestSecondOpenOfHeldFileFailsClearly(t *testing.T) {
	_, path := openTemp(t)
	start := time.Now()
	db2, err := Open(path)
	if err == nil {
		db2.Close()
		t.Fatal("second Open of a held database succeeded")
	}
	if !strings.Contains(err.Error(), "data dir is in use by another process") {
		t.Errorf("error = %q, want it to say the data dir is in use", err)
	}
	if waited := time.Since(start); waited > 10*lockTimeout {
		t.Errorf("second Open took %v; the lock timeout is %v", waited, lockTimeout)
	}
}

func TestOpenCreatesParentDirectories(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "c", "appliance.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created: %v", err)
	}
}
