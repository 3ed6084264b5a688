package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/storetest"
)

// A record changed outside the commits (as a migration changes one) is
// moved between index entries from what it stores, not from what the last
// commit wrote: the entries remembered for it no longer match its bytes.
func TestACommitMovesTheIndexesARecordHasNotThoseLastWritten(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	j := newJob("j1", "ws", "build", 1)
	if err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{j}}); err != nil {
		t.Fatal(err)
	}
	// Another path turns the stored job running, index entries and all.
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var stored engine.Job
		if err := json.Unmarshal(tx.Bucket(bucketJobs).Get([]byte(j.ID)), &stored); err != nil {
			return err
		}
		old := jobIndexes(&stored)
		stored.Status = engine.JobRunning
		v, err := json.Marshal(&stored)
		if err != nil {
			return err
		}
		if err := tx.Bucket(bucketJobs).Put([]byte(j.ID), v); err != nil {
			return err
		}
		deltas := counts{}
		if err := moveIndexes(tx, deltas, old, jobIndexes(&stored)); err != nil {
			return err
		}
		return deltas.write(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	j.Status = engine.JobCompleted
	if err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{j}}); err != nil {
		t.Fatal(err)
	}
	assertCountsMatchIndexes(t, db)
	for _, st := range []string{engine.JobPending, engine.JobRunning, engine.JobCompleted} {
		want := 0
		if st == engine.JobCompleted {
			want = 1
		}
		if _, total, err := db.Jobs(ctx, engine.JobFilter{Statuses: []string{st}}); err != nil || total != want {
			t.Errorf("jobs %s: %d (%v), want %d", st, total, err, want)
		}
	}
}

// Records written again a few commits later, as a burst's jobs and steps
// are, keep their indexes and counters exact; the ended ones are not
// remembered.
func TestRecordsWrittenAgainKeepIndexesExact(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	var jobs []*engine.Job
	var steps []*engine.Step
	for i := range 50 {
		j := newJob(fmt.Sprintf("job-%03d", i), []string{"alpha", "beta"}[i%2], "build", i)
		jobs = append(jobs, j)
		steps = append(steps, &engine.Step{JobID: j.ID, Name: "only", Status: engine.StepPending})
	}
	worker := "w1"
	for _, phase := range storetest.Lifecycle {
		for i := range jobs {
			jobs[i].Status, steps[i].Status = phase.Job, phase.Step
			if phase.Step == engine.StepRunning {
				steps[i].WorkerID = &worker
			}
		}
		if err := db.Commit(ctx, &engine.Batch{Jobs: jobs, Steps: steps}); err != nil {
			t.Fatal(err)
		}
		assertCountsMatchIndexes(t, db)
		// Remembered while they run; forgotten once ended, so the memory
		// follows the records in flight.
		want := 2 * len(jobs)
		if phase.Job == engine.JobCompleted {
			want = 0
		}
		if n := len(db.written.recs); n != want {
			t.Errorf("%s: %d records remembered, want %d", phase.Job, n, want)
		}
	}
	if _, total, err := db.Jobs(ctx, engine.JobFilter{Statuses: []string{engine.JobCompleted}}); err != nil || total != len(jobs) {
		t.Errorf("completed jobs: %d (%v), want %d", total, err, len(jobs))
	}
	if _, total, err := db.Jobs(ctx, engine.JobFilter{Statuses: []string{engine.JobPending, engine.JobRunning}}); err != nil || total != 0 {
		t.Errorf("pending or running jobs: %d (%v), want 0", total, err)
	}
}
