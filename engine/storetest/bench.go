package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// The benchmarks every store runs, one definition for all, so that their
// figures compare (the README's storage table sets them side by side).

// BenchCommitBatch measures group commit: one durable transaction per
// batch, so the cost per job falls as batches grow.
func BenchCommitBatch(b *testing.B, open func(b *testing.B) engine.Store) {
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("jobs=%d", size), func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			n := 0
			for b.Loop() {
				batch := &engine.Batch{}
				for range size {
					id := fmt.Sprintf("job-%09d", n)
					batch.Jobs = append(batch.Jobs, job(id, "ws", "task", engine.JobPending, n))
					batch.Steps = append(batch.Steps, step(id, "build", 0, engine.StepPending))
					n++
				}
				if err := s.Commit(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/job")
		})
	}
}

// BenchCommitForEach commits what a 10,000-instance for_each expands to:
// one job's 10,000 step records in one batch.
func BenchCommitForEach(b *testing.B, open func(b *testing.B) engine.Store) {
	s := open(b)
	ctx := context.Background()
	n := 0
	for b.Loop() {
		id := fmt.Sprintf("job-%09d", n)
		batch := &engine.Batch{Jobs: []*engine.Job{job(id, "ws", "task", engine.JobPending, n)}}
		for i := range 10_000 {
			st := step(id, fmt.Sprintf("each[%d]", i), i+1, engine.StepPending)
			st.FlowStep, st.Index, st.Item = "each", i, float64(i)
			batch.Steps = append(batch.Steps, st)
		}
		if err := s.Commit(ctx, batch); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
