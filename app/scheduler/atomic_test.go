package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
	"github.com/appliance-sh/appliance/store"
)

// errCrash stands for the process dying between a fire's decision and its
// commit: the commit never happens.
var errCrash = errors.New("crash before the commit")

// triggerJobs returns the jobs the trigger made, oldest first.
func triggerJobs(t *testing.T, st *enginetest.MemStore) []*engine.Job {
	t.Helper()
	jobs, _, err := st.Jobs(context.Background(), engine.JobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Job
	for i := len(jobs) - 1; i >= 0; i-- {
		if j := jobs[i]; j.SourceType == engine.SourceTrigger {
			out = append(out, j)
		}
	}
	return out
}

// A fire's job and its record are one commit: a crash before it loses
// both (so the restart's catch-up fires the slot once), and a crash after
// it keeps both (so the restart does not fire the slot again).
func TestSchedulerFireAndItsJobCommitTogether(t *testing.T) {
	f := enginetest.New(t, everyFive)
	st := f.Store
	clock := newClock(at("2025-01-01T10:01:00Z"))
	wss := newWorkspaces(f.WS)
	cfg := scheduler.Config{Workspaces: wss, Jobs: f.Engine, State: st, Clock: clock}

	// 10:05 fires, and its commit fails: the process "crashes" there.
	var mu sync.Mutex
	crashes := 0
	st.FailCommitsWhen(func(b *engine.Batch) error {
		if len(b.Fires) == 0 {
			return nil
		}
		if len(b.Jobs) == 0 {
			t.Errorf("a fire committed without its job: %+v", b.Fires)
		}
		mu.Lock()
		defer mu.Unlock()
		crashes++
		return errCrash
	})
	stop := start(t, cfg)
	due, _ := clock.armed(t, 0)
	if !due.Equal(at("2025-01-01T10:05:00Z")) {
		t.Fatalf("first fire due %s, want 10:05", due.Format(time.RFC3339))
	}
	clock.Set(due)
	eventually(t, func() string { return "the fire never reached the store" }, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return crashes == 1
	})
	stop()
	if jobs := triggerJobs(t, st); len(jobs) != 0 {
		t.Fatalf("%d trigger jobs after a commit that failed, want none", len(jobs))
	}
	if last, _, _ := st.LastFire(enginetest.WorkspaceName, "five"); !last.Equal(at("2025-01-01T10:01:00Z")) {
		t.Fatalf("last fire %s after a commit that failed, want the 10:01 start", last.Format(time.RFC3339))
	}

	// Restart at 10:12, after 10:05 and 10:10 fell due: one catch-up fire.
	st.FailCommitsWhen(nil)
	f.Restart()
	cfg.Jobs = f.Engine
	clock.Set(at("2025-01-01T10:12:00Z"))
	seq := clock.created()
	stop = start(t, cfg)
	due, seq = clock.armed(t, seq)
	if !due.Equal(at("2025-01-01T10:15:00Z")) {
		t.Fatalf("after the catch-up the next fire is %s, want 10:15", due.Format(time.RFC3339))
	}
	jobs := triggerJobs(t, st)
	if len(jobs) != 1 {
		t.Fatalf("%d trigger jobs after the restart's catch-up, want exactly 1 (no lost fire, no double)", len(jobs))
	}
	if last, _, _ := st.LastFire(enginetest.WorkspaceName, "five"); !last.Equal(at("2025-01-01T10:12:00Z")) {
		t.Errorf("last fire %s, want the 10:12 catch-up", last.Format(time.RFC3339))
	}

	// "Crash" right after that commit and restart while 10:12 is still
	// now: the fire is on record with its job, so nothing fires again.
	stop()
	f.Restart()
	cfg.Jobs = f.Engine
	stop = start(t, cfg)
	due, seq = clock.armed(t, seq)
	if !due.Equal(at("2025-01-01T10:15:00Z")) {
		t.Fatalf("after a restart the next fire is %s, want 10:15", due.Format(time.RFC3339))
	}
	if jobs := triggerJobs(t, st); len(jobs) != 1 {
		t.Fatalf("%d trigger jobs after restarting past a committed fire, want still 1", len(jobs))
	}

	// And the schedule goes on: 10:15 fires once.
	clock.Set(due)
	eventually(t, func() string { return fmt.Sprintf("%d trigger jobs, want 2", len(triggerJobs(t, st))) },
		func() bool { return len(triggerJobs(t, st)) == 2 })
	clock.armed(t, seq)
	stop()
	if jobs := triggerJobs(t, st); len(jobs) != 2 {
		t.Errorf("%d trigger jobs through 10:15, want 2", len(jobs))
	}
}

// failingDB is the bbolt store with commits that fail on demand.
type failingDB struct {
	*store.DB
	mu   sync.Mutex
	fail func(*engine.Batch) error
}

// PrepareCommit decides whether the write fails when the engine hands the
// batch over, as Commit does.
func (d *failingDB) PrepareCommit(b *engine.Batch) (func(context.Context) error, error) {
	d.mu.Lock()
	fail := d.fail
	d.mu.Unlock()
	if fail != nil {
		if err := fail(b); err != nil {
			return func(context.Context) error { return err }, nil
		}
	}
	return d.DB.PrepareCommit(b)
}

func (d *failingDB) Commit(ctx context.Context, b *engine.Batch) error {
	d.mu.Lock()
	fail := d.fail
	d.mu.Unlock()
	if fail != nil {
		if err := fail(b); err != nil {
			return err
		}
	}
	return d.DB.Commit(ctx, b)
}

// The same crash, on the bbolt store, with a real reopen of the file.
func TestSchedulerFireSurvivesACrashOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "appliance.db")
	ws := enginetest.LoadWorkspace(t, everyFive)
	open := func() (*failingDB, *engine.Engine, func()) {
		db, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		fdb := &failingDB{DB: db}
		e, err := engine.New(engine.Config{Store: fdb, Workspaces: enginetest.NewWorkspaces(ws),
			Clock: enginetest.NewClock(enginetest.Epoch), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		if err := e.Ready(ctx); err != nil {
			t.Fatal(err)
		}
		return fdb, e, func() {
			cancel()
			<-done
			db.Close()
		}
	}
	jobsOf := func(db *failingDB) int {
		jobs, _, err := db.Jobs(context.Background(), engine.JobFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(jobs)
	}
	clock := newClock(at("2025-01-01T10:01:00Z"))
	wss := newWorkspaces(ws)

	db, eng, closeAll := open()
	var crashed atomic.Bool
	db.fail = func(b *engine.Batch) error {
		if len(b.Fires) > 0 {
			crashed.Store(true)
			return errCrash
		}
		return nil
	}
	stop := start(t, scheduler.Config{Workspaces: wss, Jobs: eng, State: db, Clock: clock})
	due, _ := clock.armed(t, 0)
	clock.Set(due) // 10:05: its commit "crashes"
	eventually(t, func() string { return "the fire never reached the store" }, crashed.Load)
	stop()
	closeAll()

	// Restart at 10:12: one catch-up fire, committed with its job.
	clock.Set(at("2025-01-01T10:12:00Z"))
	db, eng, closeAll = open()
	seq := clock.created()
	stop = start(t, scheduler.Config{Workspaces: wss, Jobs: eng, State: db, Clock: clock})
	due, seq = clock.armed(t, seq)
	if !due.Equal(at("2025-01-01T10:15:00Z")) || jobsOf(db) != 1 {
		t.Fatalf("after the restart: next fire %s, %d jobs; want 10:15 and exactly 1", due.Format(time.RFC3339), jobsOf(db))
	}
	stop()
	closeAll()

	// Restart again at the same instant: nothing fires twice.
	db, eng, closeAll = open()
	defer closeAll()
	stop = start(t, scheduler.Config{Workspaces: wss, Jobs: eng, State: db, Clock: clock})
	defer stop()
	if due, _ = clock.armed(t, seq); !due.Equal(at("2025-01-01T10:15:00Z")) || jobsOf(db) != 1 {
		t.Fatalf("after a second restart: next fire %s, %d jobs; want 10:15 and still 1", due.Format(time.RFC3339), jobsOf(db))
	}
	if last, ok, _ := db.LastFire(enginetest.WorkspaceName, "five"); !ok || !last.Equal(at("2025-01-01T10:12:00Z")) {
		t.Errorf("last fire on disk %s, want the 10:12 catch-up", last.Format(time.RFC3339))
	}
}
