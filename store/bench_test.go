package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// BenchmarkCommitBatch measures group commit: one fsync'd transaction per
// batch, so the per-job cost falls as batches grow.
func BenchmarkCommitBatch(b *testing.B) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("jobs=%d", size), func(b *testing.B) {
			db, _ := openTemp(b)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				batch := &engine.Batch{}
				for range size {
					id := fmt.Sprintf("job-%09d", n)
					batch.Jobs = append(batch.Jobs, newJob(id, "ws", "task", n))
					batch.Steps = append(batch.Steps, newStep(id, "build", 0))
					n++
				}
				if err := db.Commit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/job")
		})
	}
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
