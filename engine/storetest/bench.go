package storetest

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

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

// Lifecycle is the states a one-step job and its step are written in, in
// turn: pending, running, completed.
var Lifecycle = []struct{ Job, Step string }{
	{engine.JobPending, engine.StepPending},
	{engine.JobRunning, engine.StepRunning},
	{engine.JobCompleted, engine.StepCompleted},
}

// BenchCommitLifecycle commits what a burst of one-step jobs costs the
// store once they run: batches of 100 jobs, each job and its step written
// three times in three commits (pending, running, completed), as the
// engine writes them. Updates dominate a busy server's commits; each
// moves the record's index entries from those it had. cpu-ns/record is
// the process's CPU time (the commits' encoding and bbolt's work, not
// the fsyncs' waits), steadier than ns on a loaded machine.
func BenchCommitLifecycle(b *testing.B, open func(b *testing.B) engine.Store) {
	const size = 100
	s := open(b)
	ctx := context.Background()
	n, records := 0, 0
	cpu := processCPU(b)
	for b.Loop() {
		jobs := make([]*engine.Job, size)
		steps := make([]*engine.Step, size)
		for i := range size {
			id := fmt.Sprintf("job-%09d", n)
			jobs[i] = job(id, "ws", "task", engine.JobPending, n)
			steps[i] = step(id, "build", 0, engine.StepPending)
			n++
		}
		for _, phase := range Lifecycle {
			for i := range size {
				jobs[i].Status, steps[i].Status = phase.Job, phase.Step
			}
			if err := s.Commit(ctx, &engine.Batch{Jobs: jobs, Steps: steps}); err != nil {
				b.Fatal(err)
			}
			records += 2 * size
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(records), "cpu-ns/record")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
