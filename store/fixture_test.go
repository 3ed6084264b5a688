package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// t0 is a fixed epoch so record times, and thus index order, are exact.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "appliance.db")
	db, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func ptr[T any](v T) *T { return &v }

// newJob is a pending job of ws/task (a task without a folder) created i
// seconds after t0.
func newJob(id, ws, task string, i int) *engine.Job {
	return &engine.Job{
		ID: id, Workspace: ws, TaskName: task, AccessPath: task, Mode: "distributed",
		Status: engine.JobPending, SourceType: engine.SourceAPI,
		Input:     map[string]any{"n": float64(i)},
		CreatedAt: t0.Add(time.Duration(i) * time.Second),
	}
}

func newStep(jobID, name string, seq int) *engine.Step {
	return &engine.Step{
		JobID: jobID, Name: name, FlowStep: name, Index: -1, Seq: seq,
		ActionName: name, ActionType: "script", Runner: "local",
		Status: engine.StepPending,
	}
}

func commit(t *testing.T, db *DB, b *engine.Batch) {
	t.Helper()
	if err := db.Commit(context.Background(), b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func jobIDs(jobs []*engine.Job) []string {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// seedJobs commits n jobs spread over two workspaces and three tasks, job
// i created at t0+i seconds; it returns the ids by index.
func seedJobs(t *testing.T, db *DB, n int) []string {
	t.Helper()
	ids := make([]string, n)
	b := &engine.Batch{}
	for i := range n {
		ids[i] = fmt.Sprintf("job-%03d", i)
		ws := []string{"alpha", "beta"}[i%2]
		task := []string{"build", "test", "deploy"}[i%3]
		b.Jobs = append(b.Jobs, newJob(ids[i], ws, task, i))
	}
	commit(t, db, b)
	return ids
}
