package store

import (
	"context"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func TestEventMarksCommitWithTheirJobsAndSurviveAReopen(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	if run, seq, err := db.EventMark(ctx, "consumer", "emit"); err != nil || run != "" || seq != 0 {
		t.Fatalf("mark before any: %q %d %v, want none", run, seq, err)
	}
	target := newJob("target-1", "ws", "handle", 1)
	err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{target}, EventMarks: []engine.EventMark{
		{Source: "ws/numbers", JobID: "consumer", Step: "emit", Run: "r1", Seq: 3, Consumed: 3},
		{Source: "ws/numbers", JobID: "consumer", Step: "emit", Run: "r1", Seq: 4, Consumed: 4}, // later wins
	}})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if run, seq, err := db2.EventMark(ctx, "consumer", "emit"); err != nil || run != "r1" || seq != 4 {
		t.Fatalf("mark after reopen: %q %d %v, want r1 4", run, seq, err)
	}
	if n, err := db2.EventsConsumed(ctx, "ws/numbers"); err != nil || n != 4 {
		t.Fatalf("consumed after reopen: %d %v, want 4", n, err)
	}
	if _, err := db2.Job(ctx, "target-1"); err != nil {
		t.Fatalf("the job committed with the marks: %v", err)
	}
}

func TestSweptConsumerJobLosesItsEventMarks(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	ended := newJob("consumer-old", "ws", "produce", 0)
	ended.Status, ended.CompletedAt, ended.SourceType = engine.JobCompleted, ptr(t0), engine.SourceTrigger
	emit := newStep(ended.ID, "emit", 0)
	emit.Status = engine.StepCompleted
	live := newJob("consumer-new", "ws", "produce", 1)
	live.SourceType = engine.SourceTrigger
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{ended, live}, Steps: []*engine.Step{emit, newStep(live.ID, "emit", 0)},
		EventMarks: []engine.EventMark{
			{Source: "ws/numbers", JobID: ended.ID, Step: "emit", Run: "r1", Seq: 7, Consumed: 7},
			{Source: "ws/numbers", JobID: live.ID, Step: "emit", Run: "r2", Seq: 2, Consumed: 9},
		}})
	sw := NewSweeper(SweeperConfig{DB: db, Retention: Retention{Jobs: time.Hour},
		Now: func() time.Time { return t0.Add(2 * time.Hour) }})
	if n, err := sw.Sweep(ctx); err != nil || n.Jobs != 1 {
		t.Fatalf("Sweep = %+v, %v; want the ended consumer job", n, err)
	}
	if run, seq, err := db.EventMark(ctx, ended.ID, "emit"); err != nil || run != "" || seq != 0 {
		t.Errorf("swept job's mark: %q %d %v, want none", run, seq, err)
	}
	if run, seq, err := db.EventMark(ctx, live.ID, "emit"); err != nil || run != "r2" || seq != 2 {
		t.Errorf("live job's mark: %q %d %v, want r2 2", run, seq, err)
	}
	if n, err := db.EventsConsumed(ctx, "ws/numbers"); err != nil || n != 9 {
		t.Errorf("the trigger's count: %d %v, want 9 (kept)", n, err)
	}
}
