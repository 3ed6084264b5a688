package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func TestWorkersPageByRegistrationTimeThenID(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	commit(t, db, &engine.Batch{Workers: []*engine.Worker{
		{ID: "c", RegisteredAt: t0.Add(2 * time.Second)},
		{ID: "b", RegisteredAt: t0},
		{ID: "a", RegisteredAt: t0},
		{ID: "d", RegisteredAt: t0.Add(time.Second)},
	}})
	// A heartbeat update must neither duplicate nor reorder the worker.
	commit(t, db, &engine.Batch{Workers: []*engine.Worker{{ID: "b", RegisteredAt: t0, LastSeen: t0.Add(time.Hour)}}})

	tests := []struct {
		limit, offset int
		want          []string
	}{
		{0, 0, []string{"a", "b", "d", "c"}},
		{2, 0, []string{"a", "b"}},
		{2, 2, []string{"d", "c"}},
		{2, 3, []string{"c"}},
	}
	for _, tt := range tests {
		workers, total, err := db.Workers(ctx, tt.limit, tt.offset)
		if err != nil {
			t.Fatalf("Workers: %v", err)
		}
		var got []string
		for _, w := range workers {
			got = append(got, w.ID)
		}
		if !reflect.DeepEqual(got, tt.want) || total != 4 {
			t.Errorf("Workers(%d, %d) = %v total %d; want %v total 4", tt.limit, tt.offset, got, total, tt.want)
		}
	}
}

func TestWorkerStepsAreNewestFirstJoinedWithTheirJobAndLimited(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	jobA, jobB := newJob("ja", "alpha", "build", 0), newJob("jb", "beta", "deploy", 1)
	b := &engine.Batch{Jobs: []*engine.Job{jobA, jobB}}
	// Steps become ready (and are claimed) at t0+i; w2 gets one of them.
	claim := func(jobID, name string, i int, worker string) *engine.Step {
		s := newStep(jobID, name, i)
		s.Status, s.WorkerID, s.ReadyAt = engine.StepRunning, ptr(worker), ptr(t0.Add(time.Duration(i)*time.Second))
		return s
	}
	b.Steps = []*engine.Step{
		claim("ja", "s0", 0, "w1"), claim("jb", "s1", 1, "w1"), claim("ja", "s2", 2, "w2"),
		claim("jb", "s3", 3, "w1"), claim("ja", "s4", 4, "w1"),
		newStep("ja", "unclaimed", 5),
	}
	commit(t, db, b)
	// Completing a step and its job updates what the listing shows but
	// must not add a second entry.
	s3 := claim("jb", "s3", 3, "w1")
	s3.Status, s3.StartedAt, s3.ErrorMessage = engine.StepFailed, ptr(t0.Add(4*time.Second)), ptr("Exit code: 2")
	jobB.Status = engine.JobFailed
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{jobB}, Steps: []*engine.Step{s3}})

	got, total, err := db.WorkerSteps(ctx, "w1", 3)
	if err != nil {
		t.Fatalf("WorkerSteps: %v", err)
	}
	want := []*engine.WorkerStep{
		{JobID: "ja", Workspace: "alpha", TaskName: "build", AccessPath: "build", JobStatus: engine.JobPending, StepName: "s4", ActionType: "script", Status: engine.StepRunning},
		{JobID: "jb", Workspace: "beta", TaskName: "deploy", AccessPath: "deploy", JobStatus: engine.JobFailed, StepName: "s3", ActionType: "script", Status: engine.StepFailed, StartedAt: ptr(t0.Add(4 * time.Second)), ErrorMessage: ptr("Exit code: 2")},
		{JobID: "jb", Workspace: "beta", TaskName: "deploy", AccessPath: "deploy", JobStatus: engine.JobFailed, StepName: "s1", ActionType: "script", Status: engine.StepRunning},
	}
	if total != 4 || !reflect.DeepEqual(got, want) {
		t.Errorf("WorkerSteps(w1, 3) total %d, want 4:\n%s", total, diffSteps(got, want))
	}
	got, total, err = db.WorkerSteps(ctx, "w2", 0)
	if err != nil || total != 1 || len(got) != 1 || got[0].StepName != "s2" {
		t.Errorf("WorkerSteps(w2) = %v total %d err %v; want [s2] total 1", got, total, err)
	}
	got, total, err = db.WorkerSteps(ctx, "nobody", 0)
	if err != nil || total != 0 || len(got) != 0 {
		t.Errorf("WorkerSteps(nobody) = %v total %d err %v; want none", got, total, err)
	}
}

func TestReclaimedStepMovesToItsNewWorker(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	s := newStep("j", "s", 0)
	s.WorkerID, s.ReadyAt = ptr("w1"), ptr(t0)
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{newJob("j", "ws", "t", 0)}, Steps: []*engine.Step{s}})
	s.WorkerID, s.ReadyAt = ptr("w2"), ptr(t0.Add(time.Minute))
	commit(t, db, &engine.Batch{Steps: []*engine.Step{s}})

	for worker, wantTotal := range map[string]int{"w1": 0, "w2": 1} {
		steps, total, err := db.WorkerSteps(ctx, worker, 0)
		if err != nil {
			t.Fatalf("WorkerSteps(%s): %v", worker, err)
		}
		if total != wantTotal || len(steps) != wantTotal {
			t.Errorf("WorkerSteps(%s): %d steps, total %d; want %d", worker, len(steps), total, wantTotal)
		}
	}
}

func diffSteps(got, want []*engine.WorkerStep) string {
	s := ""
	for i := range max(len(got), len(want)) {
		var g, w *engine.WorkerStep
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if !reflect.DeepEqual(g, w) {
			s += fmt.Sprintf(" [%d] got  %+v\n     want %+v\n", i, g, w)
		}
	}
	return s
}
