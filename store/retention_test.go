package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// retentionCase is a job seeded for the retention tests, with whether a
// sweep at sweepNow keeping 30 days must delete it.
type retentionCase struct {
	job    *engine.Job
	steps  []*engine.Step
	delete bool
}

var sweepNow = t0.Add(100 * 24 * time.Hour)

// retentionJobs builds jobs of every kind the sweep must tell apart: old
// and recent, ended and live, with hooks pending, never started, created
// long ago but ended recently, with steps claimed by workers, and one with
// more steps than a sweep transaction may delete.
func retentionJobs() []retentionCase {
	day := 24 * time.Hour
	var cases []retentionCase
	add := func(id, ws, task, status string, created, completed time.Duration, hooks bool, steps int, del bool) {
		j := newJob(id, ws, task, 0)
		j.CreatedAt = t0.Add(created)
		j.Status = status
		if completed > 0 {
			j.StartedAt = ptr(t0.Add(created))
			j.CompletedAt = ptr(t0.Add(completed))
		}
		j.HooksPending = hooks
		c := retentionCase{job: j, delete: del}
		for i := range steps {
			s := newStep(id, fmt.Sprintf("s%d", i), i)
			s.Status = engine.StepCompleted
			if i%2 == 0 {
				s.WorkerID = ptr([]string{"w1", "w2"}[i%4/2])
				s.ReadyAt = ptr(j.CreatedAt.Add(time.Duration(i) * time.Second))
			}
			c.steps = append(c.steps, s)
		}
		cases = append(cases, c)
	}
	for i := range 20 {
		ws := []string{"alpha", "beta"}[i%2]
		task := []string{"build", "test", "deploy"}[i%3]
		created := time.Duration(i)*day + time.Duration(i)*time.Minute
		status := []string{engine.JobCompleted, engine.JobFailed, engine.JobCancelled}[i%3]
		// Ends a day after creation: jobs 0..68 days ended before the cutoff (day 70).
		add(fmt.Sprintf("old-%02d", i), ws, task, status, created, created+day, false, i%4, true)
	}
	add("recent-done", "alpha", "build", engine.JobCompleted, 90*day, 91*day, false, 3, false)
	add("old-running", "alpha", "build", engine.JobRunning, 1*day, 0, false, 2, false)
	add("old-pending", "beta", "test", engine.JobPending, 2*day, 0, false, 1, false)
	add("old-hooks", "beta", "deploy", engine.JobFailed, 3*day, 4*day, true, 2, false)
	add("long-runner", "alpha", "deploy", engine.JobCompleted, 5*day, 80*day, false, 2, false)
	add("never-started", "gamma", "build", engine.JobCancelled, 6*day, 0, false, 0, true)
	add("huge", "gamma", "build", engine.JobCompleted, 7*day, 8*day, false, 40, true)
	add("recent-running", "gamma", "build", engine.JobRunning, 99*day, 0, false, 1, false)
	// A hook or child job of a deleted job is a job of its own: it stays
	// while it is young, with its parent_job_id naming a job that is gone.
	add("hook-of-old", "alpha", "notify", engine.JobCompleted, 95*day, 95*day+time.Minute, false, 1, false)
	cases[len(cases)-1].job.ParentJobID = "old-00"
	return cases
}

func seedRetention(t *testing.T, db *DB, cases []retentionCase) {
	t.Helper()
	b := &engine.Batch{Workers: []*engine.Worker{{ID: "w1", Name: "w1", RegisteredAt: t0}, {ID: "w2", Name: "w2", RegisteredAt: t0}}}
	for _, c := range cases {
		b.Jobs = append(b.Jobs, c.job)
		b.Steps = append(b.Steps, c.steps...)
	}
	commit(t, db, b)
}

// dumpBuckets is every key and value of the job and step buckets, their
// indexes and the counters.
func dumpBuckets(t *testing.T, db *DB) map[string][][2]string {
	t.Helper()
	out := map[string][][2]string{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				out[string(name)] = append(out[string(name)], [2]string{string(k), string(v)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSweepDeletesExactlyTheOldEndedJobsAndKeepsIndexesAndCountsExact(t *testing.T) {
	ctx := context.Background()
	cases := retentionJobs()
	db, _ := openTemp(t)
	seedRetention(t, db, cases)

	// The reference: a database that only ever held the jobs that stay.
	var kept []retentionCase
	for _, c := range cases {
		if !c.delete {
			kept = append(kept, c)
		}
	}
	ref, _ := openTemp(t)
	seedRetention(t, ref, kept)

	sw := NewSweeper(SweeperConfig{DB: db, Retention: Retention{Jobs: 30 * 24 * time.Hour},
		Batch: 7, Pause: time.Microsecond, Now: func() time.Time { return sweepNow }})
	n, err := sw.Sweep(ctx)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	wantSteps := 0
	for _, c := range cases {
		if c.delete {
			wantSteps += len(c.steps)
		}
	}
	if n.Jobs != len(cases)-len(kept) || n.Steps != wantSteps {
		t.Errorf("Sweep deleted %d jobs and %d steps, want %d and %d", n.Jobs, n.Steps, len(cases)-len(kept), wantSteps)
	}

	got, want := dumpBuckets(t, db), dumpBuckets(t, ref)
	for _, name := range allBuckets {
		g, w := got[string(name)], want[string(name)]
		if !slices.Equal(g, w) {
			t.Errorf("bucket %s after the sweep:\n got %q\nwant %q", name, g, w)
		}
	}

	for _, c := range cases {
		_, err := db.Job(ctx, c.job.ID)
		steps, _ := db.Steps(ctx, c.job.ID)
		if c.delete && (err == nil || len(steps) != 0) {
			t.Errorf("job %s: still there (err %v, %d steps)", c.job.ID, err, len(steps))
		}
		if !c.delete && (err != nil || len(steps) != len(c.steps)) {
			t.Errorf("job %s: %v, %d steps; want kept with %d", c.job.ID, err, len(steps), len(c.steps))
		}
	}
	// Lists page over what is left, and their totals say so.
	for _, f := range []engine.JobFilter{
		{}, {Offset: 2, Limit: 3}, {Workspace: "alpha"}, {Workspace: "beta", Offset: 1},
		{Workspace: "gamma"}, {Workspace: "alpha", TaskName: "build"}, {Workspace: "alpha", TaskName: "deploy", Offset: 1, Limit: 1},
		{Workspace: "beta", TaskName: "test"},
	} {
		gj, gt, err := db.Jobs(ctx, f)
		if err != nil {
			t.Fatalf("Jobs(%+v): %v", f, err)
		}
		wj, wt, _ := ref.Jobs(ctx, f)
		if gt != wt || !slices.Equal(jobIDs(gj), jobIDs(wj)) {
			t.Errorf("Jobs(%+v) = %v total %d, want %v total %d", f, jobIDs(gj), gt, jobIDs(wj), wt)
		}
	}
	assertActive(t, db, "old-hooks", "old-pending", "old-running", "recent-running")
	for _, w := range []string{"w1", "w2"} {
		gs, gt, _ := db.WorkerSteps(ctx, w, 100)
		ws, wt, _ := ref.WorkerSteps(ctx, w, 100)
		if gt != wt || len(gs) != len(ws) {
			t.Errorf("WorkerSteps(%s) = %d of %d, want %d of %d", w, len(gs), gt, len(ws), wt)
		}
	}

	// A second sweep finds nothing more.
	if n, err := sw.Sweep(ctx); err != nil || n != (SweepCounts{}) {
		t.Errorf("second Sweep = %+v, %v; want nothing", n, err)
	}
}

func TestSweepWithoutRetentionKeepsEverything(t *testing.T) {
	db, _ := openTemp(t)
	cases := retentionJobs()
	seedRetention(t, db, cases)
	before := dumpBuckets(t, db)
	sw := NewSweeper(SweeperConfig{DB: db, Now: func() time.Time { return sweepNow.Add(1000 * 24 * time.Hour) }})
	if n, err := sw.Sweep(context.Background()); err != nil || n != (SweepCounts{}) {
		t.Fatalf("Sweep = %+v, %v; want nothing deleted", n, err)
	}
	after := dumpBuckets(t, db)
	for _, name := range allBuckets {
		if !slices.Equal(before[string(name)], after[string(name)]) {
			t.Errorf("bucket %s changed without a retention", name)
		}
	}
}

func TestLogRetentionDeletesOnlyOldEndedJobsLocalLogs(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	cases := retentionJobs()
	seedRetention(t, db, cases)
	logs, err := OpenLogs(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	// Every job has a log, last written when it ended (live ones: now);
	// one file belongs to a job that is gone, one is not a log at all.
	write := func(id string, at time.Time) {
		t.Helper()
		if err := logs.Append(id, []engine.LogLine{{Step: "s0", Stream: "stdout", Line: "hello " + id}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(logs.jsonlPath(id), at, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cases {
		at := sweepNow
		if c.job.CompletedAt != nil {
			at = *c.job.CompletedAt
		} else if engine.JobTerminal(c.job.Status) {
			at = c.job.CreatedAt
		}
		write(c.job.ID, at)
	}
	write("gone", t0)
	other := filepath.Join(logs.Dir(), "notes.txt")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(other, t0, t0); err != nil {
		t.Fatal(err)
	}

	// Logs are kept 30 days, jobs forever: no record goes.
	sw := NewSweeper(SweeperConfig{DB: db, Logs: logs, Retention: Retention{Logs: 30 * 24 * time.Hour},
		Batch: 3, Now: func() time.Time { return sweepNow }})
	n, err := sw.Sweep(ctx)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	deleted := 1 // gone
	for _, c := range cases {
		_, statErr := os.Stat(logs.jsonlPath(c.job.ID))
		if c.delete && !os.IsNotExist(statErr) {
			t.Errorf("log of old ended job %s kept (%v)", c.job.ID, statErr)
		}
		if !c.delete && statErr != nil {
			t.Errorf("log of job %s deleted: %v", c.job.ID, statErr)
		}
		if c.delete {
			deleted++
		}
		if _, err := db.Job(ctx, c.job.ID); err != nil {
			t.Errorf("job %s: %v; logs retention must keep the record", c.job.ID, err)
		}
	}
	if _, err := os.Stat(logs.jsonlPath("gone")); !os.IsNotExist(err) {
		t.Errorf("old log of a job that no longer exists kept (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file that is no job log was touched: %v", err)
	}
	if n.Logs != deleted || n.Jobs != 0 {
		t.Errorf("Sweep = %+v, want %d logs and no job", n, deleted)
	}
}

func TestJobRetentionDeletesTheDeletedJobsLogs(t *testing.T) {
	db, _ := openTemp(t)
	logs, err := OpenLogs(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	old := newJob("old", "ws", "t", 0)
	old.Status, old.CompletedAt = engine.JobCompleted, ptr(t0)
	live := newJob("live", "ws", "t", 1)
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{old, live}})
	for _, id := range []string{"old", "live"} {
		if err := logs.Append(id, []engine.LogLine{{Step: "s", Line: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	sw := NewSweeper(SweeperConfig{DB: db, Logs: logs, Retention: Retention{Jobs: time.Hour},
		Now: func() time.Time { return t0.Add(2 * time.Hour) }})
	if n, err := sw.Sweep(context.Background()); err != nil || n != (SweepCounts{Jobs: 1, Logs: 1}) {
		t.Fatalf("Sweep = %+v, %v; want one job and its log", n, err)
	}
	if _, err := os.Stat(logs.jsonlPath("old")); !os.IsNotExist(err) {
		t.Errorf("deleted job's log kept: %v", err)
	}
	if got, _ := logs.Read("live", ""); !bytes.Contains([]byte(got), []byte(`"x"`)) {
		t.Errorf("live job's log = %q, want kept", got)
	}
}

// BenchmarkDeleteEndedJobs times one sweep transaction (SweepBatch
// records: jobs of two steps) in a store of 100k ended jobs: how long the
// orchestrator's next commit may wait for it.
func BenchmarkDeleteEndedJobs(b *testing.B) {
	db, _ := openTemp(b)
	ctx := context.Background()
	const n = 100_000
	for start := 0; start < n; start += 5000 {
		batch := &engine.Batch{}
		for i := start; i < start+5000; i++ {
			j := newJob(fmt.Sprintf("job-%06d", i), []string{"a", "b"}[i%2], "t", i)
			j.Status, j.CompletedAt = engine.JobCompleted, ptr(j.CreatedAt)
			batch.Jobs = append(batch.Jobs, j)
			for s := range 2 {
				st := newStep(j.ID, fmt.Sprintf("s%d", s), s)
				st.Status = engine.StepCompleted
				if s == 0 {
					st.WorkerID, st.ReadyAt = ptr("w"), ptr(j.CreatedAt)
				}
				batch.Steps = append(batch.Steps, st)
			}
		}
		if err := db.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	cutoff := t0.Add(n * time.Second)
	var from []byte
	records := 0
	for b.Loop() {
		res, err := db.DeleteEndedJobs(ctx, cutoff, from, SweepBatch)
		if err != nil {
			b.Fatal(err)
		}
		if res.Next == nil {
			b.Fatal("all deleted: run with a -benchtime below the store's size")
		}
		from = res.Next
		records += len(res.Jobs) + res.Steps
	}
	b.ReportMetric(float64(records)/float64(b.N), "records/op")
}

func TestLogRetentionKeepsTheArchivedCopy(t *testing.T) {
	f := newArchiveFixture(t, localArchive(t), ArchiveOptions{})
	job := f.finishJob("j1", engine.JobCompleted, line("build", "compiling"))
	want := f.waitArchived(job, "")
	sw := NewSweeper(SweeperConfig{DB: f.db, Logs: f.logs, Archive: f.arch, Retention: Retention{Logs: time.Hour},
		Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	// The uploader marks the log archived just after the object lands.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n, err := sw.Sweep(context.Background())
		if err != nil || n.Logs+n.KeptForArchive != 1 {
			t.Fatalf("Sweep = %+v, %v; want the local log deleted or kept", n, err)
		}
		if n.Logs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sweep = %+v; want the local log deleted", n)
		}
	}
	if _, err := os.Stat(f.logs.jsonlPath("j1")); !os.IsNotExist(err) {
		t.Fatalf("local log kept: %v", err)
	}
	if got, err := f.arch.Read("j1", ""); err != nil || got != want {
		t.Errorf("Read after the sweep = %q, %v; want the archived log", got, err)
	}
}

// TestSweepInterleavedWithCommitsKeepsCountsExact sweeps while another
// goroutine commits, as the orchestrator does: new jobs, live jobs moving
// on, and old live jobs ending (the next sweep's business). Whatever the
// interleaving, every counter equals its index's entries.
func TestSweepInterleavedWithCommitsKeepsCountsExact(t *testing.T) {
	ctx := context.Background()
	db, _ := openTemp(t)
	cases := retentionJobs()
	seedRetention(t, db, cases)
	live := cases[len(cases)-2].job // recent-running
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			j := newJob(fmt.Sprintf("new-%03d", i), []string{"alpha", "gamma"}[i%2], "build", 0)
			j.CreatedAt = sweepNow.Add(time.Duration(i) * time.Second)
			live.Status = []string{engine.JobRunning, engine.JobPending}[i%2]
			if err := db.Commit(ctx, &engine.Batch{Jobs: []*engine.Job{j, live}}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	sw := NewSweeper(SweeperConfig{DB: db, Retention: Retention{Jobs: 30 * 24 * time.Hour},
		Batch: 3, Pause: time.Microsecond, Now: func() time.Time { return sweepNow }})
	for range 5 {
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	assertCountsMatchIndexes(t, db)
	if _, total, _ := db.Jobs(ctx, engine.JobFilter{}); total != 200+7 {
		t.Errorf("total = %d, want 207 (200 new, 7 kept)", total)
	}
}

// assertCountsMatchIndexes counts every index's entries and compares them
// with the maintained counters.
func assertCountsMatchIndexes(t *testing.T, db *DB) {
	t.Helper()
	want := map[string]uint64{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		walk := func(bucket []byte, counter func(k []byte) []byte) {
			tx.Bucket(bucket).ForEach(func(k, _ []byte) error {
				want[string(counter(k))]++
				return nil
			})
		}
		walk(bucketByTime, func([]byte) []byte { return []byte(countJobs) })
		walk(bucketByWorkspace, func(k []byte) []byte {
			ws, _, _ := bytes.Cut(k, []byte{sep})
			return countWorkspace(string(ws))
		})
		walk(bucketByTask, func(k []byte) []byte {
			parts := bytes.SplitN(k, []byte{sep}, 3)
			return countTask(string(parts[0]), string(parts[1]))
		})
		walk(bucketByAccess, func(k []byte) []byte {
			parts := bytes.SplitN(k, []byte{sep}, 4)
			return countAccess(string(parts[0]), string(parts[1]), string(parts[2]))
		})
		walk(bucketWorkerSteps, func(k []byte) []byte {
			w, _, _ := bytes.Cut(k, []byte{sep})
			return countWorkerSteps(string(w))
		})
		walk(bucketWorkerOrder, func([]byte) []byte { return []byte(countWorkers) })
		walk(bucketByStatus, func(k []byte) []byte {
			st, _, _ := bytes.Cut(k, []byte{sep})
			return countStatus(string(st))
		})
		walk(bucketStepStatus, func(k []byte) []byte {
			parts := bytes.SplitN(k, []byte{sep}, 3)
			return countStepStatus(string(parts[0]), string(parts[1]))
		})
		walk(bucketBySource, func(k []byte) []byte {
			src, _, _ := bytes.Cut(k, []byte{sep})
			return countSource(string(src))
		})
		if n := tx.Bucket(bucketJobs).Stats().KeyN; uint64(n) != want[countJobs] {
			t.Errorf("%d job records, %d in the time index", n, want[countJobs])
		}
		got := map[string]uint64{}
		return tx.Bucket(bucketCounts).ForEach(func(k, v []byte) error {
			got[string(k)] = readCount(tx.Bucket(bucketCounts), k)
			if got[string(k)] != want[string(k)] {
				t.Errorf("counter %q = %d, index has %d", k, got[string(k)], want[string(k)])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// refusingArchive refuses every upload while refuse is set.
type refusingArchive struct {
	Archive
	refuse atomic.Bool
}

func (a *refusingArchive) Put(ctx context.Context, key string, gz []byte) error {
	if a.refuse.Load() {
		return errors.New("archive refuses uploads")
	}
	return a.Archive.Put(ctx, key, gz)
}

func TestLogRetentionKeepsTheLocalLogUntilTheArchiveHoldsIt(t *testing.T) {
	arch := &refusingArchive{Archive: localArchive(t)}
	arch.refuse.Store(true)
	f := newArchiveFixture(t, arch, ArchiveOptions{Attempts: 2})
	job := f.finishJob("j1", engine.JobCompleted, line("build", "compiling"))
	var pending atomic.Int64
	pending.Store(-1)
	sw := NewSweeper(SweeperConfig{DB: f.db, Logs: f.logs, Archive: f.arch, Retention: Retention{Logs: time.Hour},
		ArchivePending: func(n int) { pending.Store(int64(n)) },
		Now:            func() time.Time { return time.Now().Add(48 * time.Hour) }})
	path := f.logs.jsonlPath("j1")
	// Refused (pending at first, failed once the attempts are spent): the
	// file stays, its log says why, and the gauge counts it. Each sweep
	// queues a failed upload again, so the test waits for the failure
	// between two sweeps rather than racing the re-queue.
	sweepKeeps := func(when string) {
		t.Helper()
		n, err := sw.Sweep(context.Background())
		if err != nil || n.Logs != 0 || n.KeptForArchive != 1 {
			t.Fatalf("Sweep %s = %+v, %v; want the log kept", when, n, err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("local log deleted %s: %v", when, err)
		}
		if pending.Load() != 1 {
			t.Fatalf("pending %s = %d, want 1", when, pending.Load())
		}
	}
	sweepKeeps("while the upload is refused")
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := f.arch.State(context.Background(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		if st == UploadFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refused upload never gave up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	sweepKeeps("once the upload failed")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(data), "log retention keeps this local log until the archive holds it"); got != 1 {
		t.Fatalf("the log says it is kept %d times, want once:\n%s", got, data)
	}
	// Accepted: the sweep queued the upload again; once it lands, the next
	// sweep deletes the local file.
	arch.refuse.Store(false)
	if _, err := sw.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	archived := f.waitArchived(job, "")
	if !strings.Contains(archived, "log retention keeps this local log") {
		t.Errorf("archived log lacks the _server line:\n%s", archived)
	}
	for {
		n, err := sw.Sweep(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n.Logs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sweep after the archive accepted = %+v; want the log deleted", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("local log kept once archived: %v", err)
	}
	if pending.Load() != 0 {
		t.Errorf("pending = %d after the upload, want 0", pending.Load())
	}
	if got, err := f.arch.Read("j1", ""); err != nil || got != archived {
		t.Errorf("Read after the sweep = %q, %v; want the archived log", got, err)
	}
}
