package store

import (
	"context"
	"testing"

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
