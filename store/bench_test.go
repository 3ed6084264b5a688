package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/storetest"
)

// BenchmarkCommitBatch and BenchmarkCommitForEach are the stores' shared
// commit benchmarks (engine/storetest) on this store.
func BenchmarkCommitBatch(b *testing.B) { storetest.BenchCommitBatch(b, benchStore) }

func BenchmarkCommitLifecycle(b *testing.B) { storetest.BenchCommitLifecycle(b, benchStore) }

func BenchmarkCommitForEach(b *testing.B) { storetest.BenchCommitForEach(b, benchStore) }

func benchStore(b *testing.B) engine.Store {
	db, _ := openTemp(b)
	return db
}

// BenchmarkJobsPage lists a page of 50 out of 100k jobs: the cost is the
// page's, not the table's, because listing walks an index and reads a
// maintained total.
func BenchmarkJobsPage(b *testing.B) {
	db, _ := openTemp(b)
	ctx := context.Background()
	const total, per = 100_000, 5_000
	for start := 0; start < total; start += per {
		batch := &engine.Batch{}
		for i := start; i < start+per; i++ {
			batch.Jobs = append(batch.Jobs, newJob(fmt.Sprintf("job-%06d", i), []string{"alpha", "beta"}[i%2], []string{"build", "test"}[i%4/2], i))
		}
		if err := db.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name   string
		filter engine.JobFilter
		want   int
	}{
		{"all/first", engine.JobFilter{Limit: 50}, total},
		{"all/offset=5000", engine.JobFilter{Limit: 50, Offset: 5000}, total},
		{"workspace/first", engine.JobFilter{Workspace: "beta", Limit: 50}, total / 2},
		{"task/first", engine.JobFilter{Workspace: "beta", TaskName: "test", Limit: 50}, total / 4},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				jobs, n, err := db.Jobs(ctx, bc.filter)
				if err != nil || len(jobs) != 50 || n != bc.want {
					b.Fatalf("Jobs = %d jobs, total %d, %v; want 50 of %d", len(jobs), n, err, bc.want)
				}
			}
		})
	}
}

// BenchmarkJobsCursorAtDepth lists a page of 50 half-way down 1,000,000
// jobs (built directly through Commit): with a cursor the page seeks
// there (O(limit)); with the spec's offset it walks 500,000 index entries.
// Set APPLIANCE_BENCH_JOBS to build fewer.
func BenchmarkJobsCursorAtDepth(b *testing.B) {
	total := 1_000_000
	if n, err := strconv.Atoi(os.Getenv("APPLIANCE_BENCH_JOBS")); err == nil && n > 0 {
		total = n
	}
	db, _ := openTemp(b)
	ctx := context.Background()
	const per = 50_000
	for start := 0; start < total; start += per {
		batch := &engine.Batch{}
		for i := start; i < min(start+per, total); i++ {
			j := newJob(fmt.Sprintf("job-%07d", i), []string{"alpha", "beta"}[i%2], "build", i)
			j.Status = []string{engine.JobCompleted, engine.JobFailed}[i%2]
			batch.Jobs = append(batch.Jobs, j)
		}
		if err := db.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	depth := total / 2
	// The job just newer than the depth: the cursor a client holds there.
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
	}{
		{"cursor", engine.JobFilter{Limit: 50, Cursor: &cur}, first},
		{"cursor+status", engine.JobFilter{Limit: 50, Cursor: &cur, Statuses: []string{engine.JobFailed, engine.JobCompleted}}, first},
		{"offset", engine.JobFilter{Limit: 50, Offset: depth}, first},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				jobs, _, err := db.Jobs(ctx, bc.filter)
				if err != nil || len(jobs) != 50 || jobs[0].ID != bc.first {
					b.Fatalf("Jobs = %d jobs from %v, %v; want 50 from %s", len(jobs), jobIDs(jobs[:1]), err, bc.first)
				}
			}
		})
	}
}
