package engine_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// queueBenchYAML: the same one-step task without a limit, and under a task
// limit (keyed, with a priority from the input) and a named queue that a
// burst never reaches.
const queueBenchYAML = `
tasks:
  plain:
    input:
      env: {type: string, default: prod}
      priority: {type: integer, default: 0}
    flow:
      s: {type: script, script: "true"}
  limited:
    input:
      env: {type: string, default: prod}
      priority: {type: integer, default: 0}
    queue: burst
    concurrency: {limit: 10000, key: "{{ input.env }}", priority: "{{ input.priority }}"}
    flow:
      s: {type: script, script: "true"}
`

// BenchmarkQueueBurst measures what a limit that is not reached costs a
// burst of one-step jobs (8 instant workers, 4 clients creating): bursts
// of 1,000 jobs of the plain task and of the limited one alternate (each
// first every other round), so that the load of a shared machine weighs
// on both alike, and b.N jobs of
// each run in all. limit-cost-% is the limited jobs' extra CPU time per
// job (cpu-us/job holds still on a loaded machine, jobs/s does not), and
// throughput-cost-% their lower rate, each the median over the rounds.
func BenchmarkQueueBurst(b *testing.B) {
	f := enginetest.NewWith(b, enginetest.LoadWorkspace(b, queueBenchYAML),
		enginetest.Options{NoWorker: true, Queues: map[string]int{"burst": 10000}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var transitions atomic.Int64
	workers := fakeWorkers(ctx, b, f.Engine, 8, &transitions)
	const chunk = 1000
	var cpu, wall [2]time.Duration
	var jobs [2]int
	// Each round's ratios, limited over plain: their medians leave out the
	// rounds a load spike hit one burst of.
	var cpuRatios, rateRatios []float64
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; done, round = done+chunk, round+1 {
		n := min(chunk, b.N-done)
		var roundCPU, roundWall [2]time.Duration
		// Each goes first every other round: the second burst of a round
		// pays for the garbage of the first.
		for k := range 2 {
			v := (k + round) % 2
			task := []string{"plain", "limited"}[v]
			cpu0, start := cpuTime(b), time.Now()
			burstOf(ctx, b, f.Engine, task, n)
			roundWall[v] = time.Since(start)
			roundCPU[v] = cpuTime(b) - cpu0
			wall[v] += roundWall[v]
			cpu[v] += roundCPU[v]
			jobs[v] += n
		}
		cpuRatios = append(cpuRatios, float64(roundCPU[1])/float64(roundCPU[0]))
		rateRatios = append(rateRatios, float64(roundWall[0])/float64(roundWall[1]))
	}
	b.StopTimer()
	cancel()
	workers.Wait()
	per := func(v int) float64 { return float64(cpu[v].Microseconds()) / float64(jobs[v]) }
	rate := func(v int) float64 { return float64(jobs[v]) / wall[v].Seconds() }
	b.ReportMetric(per(0), "plain-cpu-us/job")
	b.ReportMetric(per(1), "limited-cpu-us/job")
	b.ReportMetric(rate(0), "plain-jobs/s")
	b.ReportMetric(rate(1), "limited-jobs/s")
	b.ReportMetric(100*(median(cpuRatios)-1), "limit-cost-%")
	b.ReportMetric(100*(1-median(rateRatios)), "throughput-cost-%")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// burstOf creates n jobs of task from 4 clients at once and waits until
// every one has ended.
func burstOf(ctx context.Context, b *testing.B, e *engine.Engine, task string, n int) {
	dones := make([]<-chan struct{}, n)
	var wg sync.WaitGroup
	const creators = 4
	for k := range creators {
		wg.Go(func() {
			for i := k; i < n; i += creators {
				j, err := e.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: task,
					Input: map[string]any{"priority": i % 3}})
				if err != nil {
					b.Error(err)
					return
				}
				if dones[i], err = e.JobDone(ctx, j.ID); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, d := range dones {
		if d != nil {
			<-d
		}
	}
}
