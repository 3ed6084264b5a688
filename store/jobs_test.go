package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

func TestJobUpdateMovesItOutOfTheActiveIndexAndKeepsCounts(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	job := newJob("j1", "ws", "deploy", 0)
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job, newJob("j2", "ws", "build", 1)}})

	assertActive(t, db, "j1", "j2")
	job.Status = engine.JobRunning
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	assertActive(t, db, "j1", "j2")
	job.Status = engine.JobCompleted
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	assertActive(t, db, "j2")

	for _, f := range []struct {
		filter engine.JobFilter
		want   int
	}{
		{engine.JobFilter{}, 2},
		{engine.JobFilter{Workspace: "ws"}, 2},
		{engine.JobFilter{Workspace: "ws", TaskName: "deploy"}, 1},
		{engine.JobFilter{Workspace: "ws", TaskName: "build"}, 1},
		{engine.JobFilter{Workspace: "other"}, 0},
	} {
		jobs, total, err := db.Jobs(ctx, f.filter)
		if err != nil {
			t.Fatalf("Jobs(%+v): %v", f.filter, err)
		}
		if total != f.want || len(jobs) != f.want {
			t.Errorf("Jobs(%+v): %d jobs, total %d; want %d (updates must not count twice)", f.filter, len(jobs), total, f.want)
		}
	}
	got, err := db.Job(ctx, "j1")
	if err != nil || got.Status != engine.JobCompleted {
		t.Errorf("Job(j1) = %+v, %v; want completed", got, err)
	}
}

func assertActive(t *testing.T, db *DB, want ...string) {
	t.Helper()
	jobs, _, _, err := db.LoadActive(context.Background())
	if err != nil {
		t.Fatalf("LoadActive: %v", err)
	}
	if got := jobIDs(jobs); !slices.Equal(got, want) {
		t.Errorf("active jobs = %v, want %v", got, want)
	}
}

func TestEveryTerminalStatusLeavesTheActiveIndex(t *testing.T) {
	for _, status := range []string{engine.JobPending, engine.JobRunning, engine.JobCompleted, engine.JobFailed, engine.JobCancelled, engine.JobSkipped} {
		t.Run(status, func(t *testing.T) {
			db, _ := openTemp(t)
			job := newJob("j", "ws", "t", 0)
			job.Status = status
			commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
			if engine.JobTerminal(status) {
				assertActive(t, db)
			} else {
				assertActive(t, db, "j")
			}
		})
	}
}

func TestLoadActiveReturnsOnlyActiveJobsWithAllTheirStepsAndAllWorkers(t *testing.T) {
	db, _ := openTemp(t)
	running := newJob("run", "ws", "t", 0)
	running.Status = engine.JobRunning
	done := newJob("done", "ws", "t", 1)
	done.Status = engine.JobFailed
	commit(t, db, &engine.Batch{
		Jobs: []*engine.Job{running, done, newJob("pend", "ws", "t", 2)},
		Steps: []*engine.Step{
			newStep("run", "a", 0), newStep("run", "b", 1),
			newStep("done", "x", 0), newStep("pend", "p", 0),
		},
		Workers: []*engine.Worker{{ID: "w1", RegisteredAt: t0}, {ID: "w2", Status: engine.WorkerInactive, RegisteredAt: t0}},
	})

	jobs, steps, workers, err := db.LoadActive(context.Background())
	if err != nil {
		t.Fatalf("LoadActive: %v", err)
	}
	if got := jobIDs(jobs); !reflect.DeepEqual(got, []string{"pend", "run"}) {
		t.Errorf("jobs = %v, want [pend run]", got)
	}
	var stepNames []string
	for _, s := range steps {
		stepNames = append(stepNames, s.JobID+"/"+s.Name)
	}
	if want := []string{"pend/p", "run/a", "run/b"}; !reflect.DeepEqual(stepNames, want) {
		t.Errorf("steps = %v, want %v", stepNames, want)
	}
	if len(workers) != 2 {
		t.Errorf("workers = %d, want 2 (inactive ones too)", len(workers))
	}
}

func TestJobsPaginateNewestFirstAcrossFilters(t *testing.T) {
	db, _ := openTemp(t)
	seedJobs(t, db, 30) // job i: workspace alpha if i even, task build/test/deploy by i%3
	ids := func(is ...int) []string {
		out := make([]string, len(is))
		for k, i := range is {
			out[k] = fmt.Sprintf("job-%03d", i)
		}
		return out
	}
	tests := []struct {
		name      string
		filter    engine.JobFilter
		want      []string
		wantTotal int
	}{
		{"first page of all", engine.JobFilter{Limit: 3}, ids(29, 28, 27), 30},
		{"second page of all", engine.JobFilter{Limit: 3, Offset: 3}, ids(26, 25, 24), 30},
		{"last partial page", engine.JobFilter{Limit: 4, Offset: 28}, ids(1, 0), 30},
		{"offset past the end", engine.JobFilter{Limit: 4, Offset: 30}, ids(), 30},
		{"workspace", engine.JobFilter{Workspace: "beta", Limit: 4}, ids(29, 27, 25, 23), 15},
		{"workspace page 2", engine.JobFilter{Workspace: "beta", Limit: 4, Offset: 4}, ids(21, 19, 17, 15), 15},
		{"workspace and task", engine.JobFilter{Workspace: "alpha", TaskName: "build", Limit: 10}, ids(24, 18, 12, 6, 0), 5},
		{"workspace and task offset", engine.JobFilter{Workspace: "beta", TaskName: "deploy", Limit: 2, Offset: 1}, ids(23, 17), 5},
		{"unknown workspace", engine.JobFilter{Workspace: "gamma"}, ids(), 0},
		{"workspace name is a prefix of another", engine.JobFilter{Workspace: "alph"}, ids(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, total, err := db.Jobs(context.Background(), tt.filter)
			if err != nil {
				t.Fatalf("Jobs: %v", err)
			}
			if got := jobIDs(jobs); !reflect.DeepEqual(got, tt.want) || total != tt.wantTotal {
				t.Errorf("Jobs(%+v) = %v total %d; want %v total %d", tt.filter, got, total, tt.want, tt.wantTotal)
			}
		})
	}
}

func TestJobsDefaultsToPagesOf50(t *testing.T) {
	db, _ := openTemp(t)
	seedJobs(t, db, 60)
	jobs, total, err := db.Jobs(context.Background(), engine.JobFilter{})
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	if len(jobs) != 50 || total != 60 || jobs[0].ID != "job-059" {
		t.Errorf("got %d jobs (first %s), total %d; want 50 from job-059, total 60", len(jobs), jobs[0].ID, total)
	}
}

func TestJobsRejectsBadFilters(t *testing.T) {
	db, _ := openTemp(t)
	for _, f := range []engine.JobFilter{{TaskName: "build"}, {Offset: -1}} {
		if _, _, err := db.Jobs(context.Background(), f); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("Jobs(%+v) error = %v, want ErrInvalid", f, err)
		}
	}
}

func TestJobsOrderIsByCreationTimeNotInsertOrder(t *testing.T) {
	db, _ := openTemp(t)
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{newJob("late", "ws", "t", 50), newJob("early", "ws", "t", -5)}})
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{newJob("mid", "ws", "t", 10)}})
	jobs, _, err := db.Jobs(context.Background(), engine.JobFilter{})
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	if got := jobIDs(jobs); !reflect.DeepEqual(got, []string{"late", "mid", "early"}) {
		t.Errorf("jobs = %v, want [late mid early]", got)
	}
}

func TestAnEndedJobWithHooksPendingStaysActiveUntilTheyAreCleared(t *testing.T) {
	db, _ := openTemp(t)
	job := newJob("j", "ws", "t", 0)
	job.Status = engine.JobRunning
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}, Steps: []*engine.Step{newStep("j", "a", 0)}})

	// The job ends while its hooks render: it stays in the active index,
	// so a restart finds it and fires them again.
	job.Status, job.HooksPending = engine.JobFailed, true
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	assertActive(t, db, "j")
	jobs, steps, _, err := db.LoadActive(context.Background())
	if err != nil {
		t.Fatalf("LoadActive: %v", err)
	}
	if len(jobs) != 1 || !jobs[0].HooksPending || jobs[0].Status != engine.JobFailed || len(steps) != 1 {
		t.Fatalf("LoadActive = %d jobs %+v, %d steps; want the failed job with hooks pending and its step", len(jobs), jobs, len(steps))
	}

	// The commit that creates the hook jobs clears it.
	job.HooksPending = false
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	assertActive(t, db)
	if jobs, _, _, err := db.LoadActive(context.Background()); err != nil || len(jobs) != 0 {
		t.Fatalf("LoadActive = %v, %v; want no jobs once the hooks are cleared", jobIDs(jobs), err)
	}
}
