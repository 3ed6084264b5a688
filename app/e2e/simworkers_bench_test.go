package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
)

// BenchmarkSimulatedWorkers measures how many steps a second one server
// orchestrates through /worker with 10, 100 and 1,000 simulated workers:
// goroutines speaking the worker protocol over real HTTP on loopback
// (claims of up to 4 steps, their results in one report), completing each
// step at once, spawning nothing. The jobs (one step each) are queued
// before the clock starts. CPU per step counts the whole process: the
// server and the simulated workers.
func BenchmarkSimulatedWorkers(b *testing.B) {
	app.TuneRuntime()
	for _, workers := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			dir := b.TempDir()
			writeWorkspace(b, dir, chainWorkspace(1))
			f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
			transport := &http.Transport{MaxIdleConns: 2 * workers, MaxIdleConnsPerHost: 2 * workers}
			b.Cleanup(transport.CloseIdleConnections)
			sims := make([]*rawWorker, workers)
			for i := range sims {
				sims[i] = registerRawWorker(b, f.url)
				sims[i].http = &http.Client{Transport: transport}
			}
			const jobs = 5000
			var elapsed time.Duration
			commits := f.srv.engine.Commits()
			cpu := cpuTime(b)
			for b.Loop() {
				queueJobs(b, f, jobs)
				var done atomic.Int64
				start := time.Now()
				var wg sync.WaitGroup
				for _, w := range sims {
					wg.Go(func() {
						for done.Load() < jobs {
							n, err := w.claimAndReport(4)
							if err != nil {
								b.Error(err)
								return
							}
							done.Add(int64(n))
						}
					})
				}
				wg.Wait()
				elapsed += time.Since(start)
			}
			steps := float64(jobs * b.N)
			b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(f.srv.engine.Commits()-commits)/steps, "commits/step")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/steps, "cpu-us/step")
		})
	}
}

// queueJobs creates n one-step jobs; no worker claims them yet.
func queueJobs(b *testing.B, f *serverFixture, n int) {
	b.StopTimer()
	defer b.StartTimer()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for k := c; k < n; k += 8 {
				if _, err := f.srv.engine.CreateJob(context.Background(), engine.CreateJob{Workspace: "bench", Task: "one"}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// claimAndReport claims up to max steps (waiting a second at most) and
// reports each completed at once, in one request; it returns how many.
func (w *rawWorker) claimAndReport(max int) (int, error) {
	var claimed struct {
		Assignments []struct {
			JobID    string `json:"job_id"`
			StepName string `json:"step_name"`
		} `json:"assignments"`
	}
	if err := w.post("/worker/claims?wait=1", map[string]any{"worker_id": w.id, "max": max}, &claimed); err != nil {
		return 0, err
	}
	if len(claimed.Assignments) == 0 {
		return 0, nil
	}
	results := make([]map[string]any, len(claimed.Assignments))
	for i, a := range claimed.Assignments {
		results[i] = map[string]any{"job_id": a.JobID, "step_name": a.StepName, "worker_id": w.id, "output": nil, "exit_code": 0, "error": nil}
	}
	var answers struct {
		Results []struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
		} `json:"results"`
	}
	if err := w.post("/worker/reports", map[string]any{"results": results}, &answers); err != nil {
		return 0, err
	}
	for _, a := range answers.Results {
		if a.Status != http.StatusOK {
			return 0, fmt.Errorf("report answered %d: %s", a.Status, a.Error)
		}
	}
	return len(results), nil
}
