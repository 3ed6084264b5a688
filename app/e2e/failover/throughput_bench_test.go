package failover_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// BenchmarkPairThroughput submits b.N one-step `true` jobs from 16
// clients at once to a pair on the durable cluster (fsync on) and reports
// jobs/s from the first submission to the last job completed: /leader
// sends every request to the leader, /half-forwarded sends every other one
// to the follower, which forwards it. The leader runs 4 in-process
// workers, as BenchmarkThousandJobs does.
//
//	go test ./app/e2e/failover -run X -bench PairThroughput -benchtime 1000x
func BenchmarkPairThroughput(b *testing.B) {
	for _, bc := range []struct {
		name    string
		forward bool
	}{{"leader", false}, {"half-forwarded", true}} {
		b.Run(bc.name, func(b *testing.B) {
			skipShort(b)
			p := newPairOn(b, pgtest.Durable(b).Database(b), "tasks:\n  hello:\n    flow:\n      hi:\n        type: script\n        script: \"true\"\n")
			leader := p.start("a", 4)
			waitFor(b, 10*time.Second, "replica a to lead", leader.leads)
			follower := p.start("b", 4)
			waitFor(b, 5*time.Second, "replica b to follow a", func() bool {
				st, err := follower.status()
				return err == nil && !st.Leading && st.Leader == leader.url
			})
			completed := func() int {
				var n int
				if err := p.connect().QueryRow(context.Background(), `SELECT count(*) FROM jobs WHERE status = 'completed'`).Scan(&n); err != nil {
					b.Fatal(err)
				}
				return n
			}
			b.ResetTimer()
			start := time.Now()
			jobs := make(chan int)
			go func() {
				defer close(jobs)
				for i := range b.N {
					jobs <- i
				}
			}()
			var wg sync.WaitGroup
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						to := leader
						if bc.forward && i%2 == 1 {
							to = follower
						}
						if _, err := execute(b, "hello", uuid.NewString(), to); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			acked := time.Since(start)
			waitFor(b, 5*time.Minute, "every job to complete", func() bool { return completed() >= b.N })
			took := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/took.Seconds(), "jobs/s")
			b.ReportMetric(float64(b.N)/acked.Seconds(), "submits/s")
			b.Logf("%d jobs: submitted in %s, completed in %s: %.0f jobs/s", b.N, acked.Round(time.Millisecond), took.Round(time.Millisecond), float64(b.N)/took.Seconds())
		})
	}
}
