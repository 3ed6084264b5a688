package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
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
// (claims of up to 4 steps), completing each step at once, spawning
// nothing. With reports=apart a worker sends its results in one report
// after each claim; with reports=in-claims they ride its next claim, as
// `appliance worker` sends them (one request and one commit a cycle). The
// jobs (one step each) are queued before the clock starts. CPU per step
// counts the whole process: the server and the simulated workers, and
// the jobs' creation; so do commits/step, while claim-cpu-us/step and
// claim-commits/step count the timed part's alone. The timed part ends
// when the last result is acknowledged.
func BenchmarkSimulatedWorkers(b *testing.B) {
	app.TuneRuntime()
	for _, bc := range []struct {
		workers int
		paired  bool
	}{{10, false}, {100, false}, {1000, false}, {10, true}, {100, true}, {1000, true}} {
		workers := bc.workers
		mode := map[bool]string{false: "apart", true: "in-claims"}[bc.paired]
		b.Run(fmt.Sprintf("reports=%s/workers=%d", mode, workers), func(b *testing.B) {
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
			var timedCommits int64
			var timedCPU time.Duration
			commits := f.srv.engine.Commits()
			cpu := cpuTime(b)
			for b.Loop() {
				queueJobs(b, f, jobs)
				var done atomic.Int64
				stopProfile := profileTimed(b)
				c0, cpu0 := f.srv.engine.Commits(), cpuTime(b)
				// The clock stops at the acknowledgement of the last result:
				// by then the workers with nothing left to carry are
				// long-polling for work that will not come, and their wait
				// (a second at most) is no part of the steps' time. It is
				// not cut short: a claim given up just as the next round's
				// jobs come can be answered with one of their steps, which
				// only a heartbeat listing the worker's running steps (not
				// sent here) would bring back, and the round would stall.
				finished := make(chan time.Time, 1)
				start := time.Now()
				var wg sync.WaitGroup
				for _, w := range sims {
					wg.Go(func() {
						cycle := w.claimAndReport
						if bc.paired {
							cycle = w.claimCarrying
						}
						for done.Load() < jobs {
							n, err := cycle(4)
							if err != nil {
								b.Error(err)
								return
							}
							if total := done.Add(int64(n)); total >= jobs && total-int64(n) < jobs {
								finished <- time.Now()
							}
						}
					})
				}
				stopped := make(chan struct{})
				go func() { wg.Wait(); close(stopped) }()
				select {
				case end := <-finished:
					elapsed += end.Sub(start)
				case <-stopped:
					b.Fatal("the simulated workers stopped before each result was acknowledged")
				}
				stopProfile()
				timedCommits += f.srv.engine.Commits() - c0
				timedCPU += cpuTime(b) - cpu0
				<-stopped
			}
			steps := float64(jobs * b.N)
			b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(f.srv.engine.Commits()-commits)/steps, "commits/step")
			b.ReportMetric(float64(timedCommits)/steps, "claim-commits/step")
			b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/steps, "cpu-us/step")
			b.ReportMetric(float64(timedCPU.Microseconds())/steps, "claim-cpu-us/step")
		})
	}
}

// profileTimed starts a CPU profile of the timed part of one iteration,
// when APPLIANCE_BENCH_CPUPROFILE names a file (suffixed with the
// benchmark's name): a profile of the whole run is mostly the jobs'
// creation and the workers' registration. Each iteration overwrites the
// last one's. It returns what stops it.
func profileTimed(b *testing.B) func() {
	path := os.Getenv("APPLIANCE_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path + "." + strings.NewReplacer("/", "_", "=", "-").Replace(b.Name()))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
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
	var claimed simClaimed
	if err := w.post("/worker/claims?wait=1", map[string]any{"worker_id": w.id, "max": max}, &claimed); err != nil {
		return 0, err
	}
	if len(claimed.Assignments) == 0 {
		return 0, nil
	}
	results := claimed.results(w.id)
	var answers simClaimed
	if err := w.post("/worker/reports", map[string]any{"results": results}, &answers); err != nil {
		return 0, err
	}
	return answers.acknowledged(len(results))
}

// claimCarrying claims up to max steps with the results of those the last
// claim brought (a claim carrying results does not wait for work; one
// carrying none waits a second at most), and keeps the new ones' results
// for the next; it returns how many results were acknowledged.
func (w *rawWorker) claimCarrying(max int) (int, error) {
	body := map[string]any{"worker_id": w.id, "max": max}
	if len(w.held) > 0 {
		body["results"] = w.held
	}
	var claimed simClaimed
	if err := w.post("/worker/claims?wait=1", body, &claimed); err != nil {
		return 0, err
	}
	n, err := claimed.acknowledged(len(w.held))
	if err != nil {
		return 0, err
	}
	w.held = claimed.results(w.id)
	return n, nil
}

// simClaimed is an answer of /worker/claims or /worker/reports as a
// simulated worker reads it.
type simClaimed struct {
	Assignments []struct {
		JobID    string `json:"job_id"`
		StepName string `json:"step_name"`
	} `json:"assignments"`
	Results []struct {
		Status int    `json:"status"`
		Error  string `json:"error"`
	} `json:"results"`
}

// results are the claimed steps' results, each completed at once.
func (c *simClaimed) results(workerID string) []map[string]any {
	results := make([]map[string]any, len(c.Assignments))
	for i, a := range c.Assignments {
		results[i] = map[string]any{"job_id": a.JobID, "step_name": a.StepName, "worker_id": workerID, "output": nil, "exit_code": 0, "error": nil}
	}
	return results
}

// acknowledged checks that the answer took each of the sent results.
func (c *simClaimed) acknowledged(sent int) (int, error) {
	if len(c.Results) != sent {
		return 0, fmt.Errorf("%d results sent, %d answered", sent, len(c.Results))
	}
	for _, a := range c.Results {
		if a.Status != http.StatusOK {
			return 0, fmt.Errorf("result answered %d: %s", a.Status, a.Error)
		}
	}
	return sent, nil
}
