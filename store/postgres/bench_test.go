package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/storetest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// The benchmarks mirror store/bench_test.go's, on a cluster with fsync
// and synchronous commits on (pgtest Durable), over its Unix socket, so
// the figures compare with bbolt's fsync'd commits.

// benchDB opens a store on a new database of the durable cluster.
func benchDB(b *testing.B) (*postgres.DB, string) {
	b.Helper()
	dsn := pgtest.Durable(b).Database(b)
	db, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db, dsn
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

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

// BenchmarkCommitBatch and BenchmarkCommitForEach are the stores' shared
// commit benchmarks (engine/storetest) on this store.
func BenchmarkCommitBatch(b *testing.B) { storetest.BenchCommitBatch(b, benchStore) }

func BenchmarkCommitLifecycle(b *testing.B) { storetest.BenchCommitLifecycle(b, benchStore) }

func BenchmarkCommitForEach(b *testing.B) { storetest.BenchCommitForEach(b, benchStore) }

func benchStore(b *testing.B) engine.Store {
	db, _ := benchDB(b)
	return db
}

// BenchmarkJobsCursorAtDepth lists a page of 50 half-way down 1,000,000
// jobs, as bbolt's benchmark does: with a cursor the page is a range scan
// from there (O(limit)); with the offset it walks 500,000 index entries.
// The jobs are loaded with COPY (the counts follow by trigger). Set
// APPLIANCE_BENCH_JOBS to build fewer.
func BenchmarkJobsCursorAtDepth(b *testing.B) {
	total := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("APPLIANCE_BENCH_JOBS")); err == nil && n > 0 {
		total = n
	}
	db, dsn := benchDB(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	built := time.Now()
	copyJobs(b, conn, total, func(i int) string { return []string{"alpha", "beta"}[i%2] })
	// As a database that has been up a while: hint bits and the
	// visibility map set, the load's dirty pages written out.
	for _, sql := range []string{"VACUUM ANALYZE jobs", "CHECKPOINT"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%d jobs loaded with COPY in %v", total, time.Since(built).Round(time.Millisecond))
	depth := total / 2
	mark := newJob(fmt.Sprintf("job-%07d", total-depth), "", "", total-depth)
	cur, err := engine.ParseJobCursor(engine.CursorOf(mark))
	if err != nil {
		b.Fatal(err)
	}
	first := fmt.Sprintf("job-%07d", total-depth-1)
	for _, bc := range []struct {
		name   string
		filter engine.JobFilter
		first  string
		total  int
	}{
		{"cursor", engine.JobFilter{Limit: 50, Cursor: &cur}, first, total},
		{"cursor+status", engine.JobFilter{Limit: 50, Cursor: &cur, Statuses: []string{engine.JobFailed, engine.JobCompleted}}, first, total},
		{"cursor+workspace", engine.JobFilter{Limit: 50, Cursor: &cur, Workspace: []string{"alpha", "beta"}[(total-depth-1)%2]}, first, total / 2},
		{"offset", engine.JobFilter{Limit: 50, Offset: depth}, first, total},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				jobs, n, err := db.Jobs(ctx, bc.filter)
				if err != nil || len(jobs) != 50 || jobs[0].ID != bc.first || n != bc.total {
					b.Fatalf("Jobs = %d jobs (total %d), %v; want 50 from %s of %d", len(jobs), n, err, bc.first, bc.total)
				}
			}
		})
	}
}

// BenchmarkCommitFence measures what the epoch check adds to a commit:
// one-job batches committed in turn to a lone server's store (no fence)
// and to a leader's, whose transaction first locks the lease row FOR
// SHARE and checks its epoch (appliance_fence). Alternating the two in
// one loop keeps a shared machine's changing load out of the difference.
func BenchmarkCommitFence(b *testing.B) {
	lone, _ := benchDB(b)
	leader, _ := benchDB(b)
	ctx := context.Background()
	el, err := leader.NewElector(postgres.ElectorConfig{Holder: "bench", AdvertiseURL: "http://bench.test",
		Lease: time.Minute, Renew: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); el.Run(runCtx) }()
	b.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); !el.Current().Leader; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the elector did not take the lease")
		}
	}
	var took [2]time.Duration // lone, leader
	n := 0
	for b.Loop() {
		for i, db := range []*postgres.DB{lone, leader} {
			id := fmt.Sprintf("job-%09d", n)
			batch := &engine.Batch{Jobs: []*engine.Job{newJob(id, "ws", "task", n)}, Steps: []*engine.Step{newStep(id, "build", 0)}}
			began := time.Now()
			if err := db.Commit(ctx, batch); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(began)
		}
		n++
	}
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(n), "ns/commit-unfenced")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(n), "ns/commit-fenced")
	b.ReportMetric(float64((took[1]-took[0]).Nanoseconds())/float64(n), "ns/fence")
}

// copyJobs loads total ended jobs (job-0000000 on, a second apart, in
// workspace ws(i), completed and failed in turn) straight into the jobs
// table with COPY; the counts follow by trigger.
func copyJobs(tb testing.TB, conn *pgx.Conn, total int, ws func(i int) string) {
	tb.Helper()
	i := 0
	n, err := conn.CopyFrom(context.Background(), pgx.Identifier{"jobs"},
		[]string{"id", "workspace", "task_name", "access_path", "status", "source_type", "created_ns", "active", "ended_ns", "rec"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == total {
				return nil, nil
			}
			j := newJob(fmt.Sprintf("job-%07d", i), ws(i), "build", i)
			j.Status = []string{engine.JobCompleted, engine.JobFailed}[i%2]
			rec, err := json.Marshal(j)
			i++
			return []any{j.ID, j.Workspace, j.TaskName, j.AccessPath, j.Status, j.SourceType,
				j.CreatedAt.UnixNano(), false, j.CreatedAt.UnixNano(), rec}, err
		}))
	if err != nil || n != int64(total) {
		tb.Fatalf("copy %d jobs: %d, %v", total, n, err)
	}
}
