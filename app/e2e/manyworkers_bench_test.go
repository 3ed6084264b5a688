package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
)

// BenchmarkManyWorkers runs 10,000 queued one-step `true` jobs
// (APPLIANCE_BENCH_JOBS to change it) through 20 `appliance worker`
// processes of 4 slots each: jobs/s, the server's CPU a job, fairness
// (the least and most steps a worker ran, against the mean) and the
// percentiles of the claims' latency with 20 workers at the server at once
// (/metrics' appliance_worker_claim_seconds). A claim's latency with an
// idle worker is BenchmarkRemoteClaimLatency's; here the steps are ready
// before the workers claim.
func BenchmarkManyWorkers(b *testing.B) {
	app.TuneRuntime()
	jobs := 10_000
	if n, err := strconv.Atoi(os.Getenv("APPLIANCE_BENCH_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	const procs = 20
	ctx := context.Background()
	for b.Loop() {
		dir := b.TempDir()
		writeWorkspace(b, dir, chainWorkspace(1))
		f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
		// Queued first: no worker is there to claim them yet.
		ids := make([]string, jobs)
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Go(func() {
				for k := c; k < jobs; k += 8 {
					j, err := f.srv.engine.CreateJob(ctx, engine.CreateJob{Workspace: "bench", Task: "one"})
					if err != nil {
						b.Error(err)
						return
					}
					ids[k] = j.ID
				}
			})
		}
		wg.Wait()
		cpu := cpuTime(b)
		for i := range procs {
			spawnWorker(b, f.url, workerToken, fmt.Sprintf("many-%02d", i), "max_concurrent: 4\n")
		}
		for _, id := range ids {
			f.waitDone(id)
		}
		serverCPU := cpuTime(b) - cpu

		// From the first step started to the last completed, by the
		// server's clock, as the workers took a moment to start.
		var first, last time.Time
		perWorker := map[string]int{}
		for _, id := range ids {
			_, steps, err := f.srv.engine.Job(ctx, id)
			if err != nil || len(steps) != 1 || steps[0].Status != engine.StepCompleted {
				b.Fatalf("job %s: %v %+v", id, err, steps)
			}
			s := steps[0]
			if first.IsZero() || s.StartedAt.Before(first) {
				first = *s.StartedAt
			}
			if s.CompletedAt.After(last) {
				last = *s.CompletedAt
			}
			if s.WorkerID != nil {
				perWorker[*s.WorkerID]++
			}
		}
		mean := float64(jobs) / procs
		lo, hi := float64(jobs), 0.0
		for _, n := range perWorker {
			lo, hi = min(lo, float64(n)), max(hi, float64(n))
		}
		if len(perWorker) < procs {
			lo = 0
		}
		b.ReportMetric(float64(jobs)/last.Sub(first).Seconds(), "jobs/s")
		b.ReportMetric(float64(serverCPU.Microseconds())/float64(jobs), "server-cpu-us/job")
		b.ReportMetric(lo/mean, "least-share")
		b.ReportMetric(hi/mean, "most-share")
		// The claims' latency as the server's /metrics has it (a claim's
		// arrival to its answer; none waited, the jobs were all queued),
		// interpolated within its buckets.
		_, fams := scrape(b, f.url, "")
		claims := fams["appliance_worker_claim_seconds"].GetMetric()[0].GetHistogram()
		for _, q := range []struct {
			q    float64
			name string
		}{{0.5, "claim-p50-ms"}, {0.9, "claim-p90-ms"}, {0.99, "claim-p99-ms"}} {
			b.ReportMetric(1000*quantile(claims, q.q), q.name)
		}
		b.ReportMetric(float64(claims.GetSampleCount())/float64(jobs), "claims/job")
	}
}

// BenchmarkIdleWorkersLongPolling measures what 200 idle workers cost the
// server: each long-polls a claim of several with nothing ready (simulated
// workers over real HTTP, a claim of up to 4, waiting 20 s); reports the
// server's CPU over 10 s, in percent of one core.
func BenchmarkIdleWorkersLongPolling(b *testing.B) {
	const workers = 200
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(1))
	f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	// The pollers end with the server, which answers parked claims as it stops.
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	for range workers {
		w := registerRawWorker(b, f.url)
		go func() {
			for ctx.Err() == nil {
				if w.post("/worker/claims?wait=20", map[string]any{"worker_id": w.id, "max": 4}, nil) != nil {
					return
				}
			}
		}()
	}
	waitUntil(b, "the claims to park", func() bool { return f.srv.engine.ParkedClaims() == workers })
	for b.Loop() {
		cpu := cpuTime(b)
		time.Sleep(10 * time.Second) // the measured idle time
		b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/10e6*100, "cpu-%")
	}
}
