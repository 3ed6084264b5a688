package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// BenchmarkQueueBurst is a burst of one-step jobs through 8 instant
// workers, created by 4 clients, one op per job: without a limit, and
// under a task limit (keyed, with a rendered priority) and a named queue
// that the burst never reaches. What the limits cost is the difference:
// the cpu-us/job figure holds still on a loaded machine, jobs/s does not.
func BenchmarkQueueBurst(b *testing.B) {
	cases := []struct{ name, task string }{
		{"no-limit", "plain"},
		{"limit-not-reached", "limited"},
		{"keyed-limit-not-reached", "keyed"},
	}
	const yaml = `
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
    concurrency: {limit: 10000}
    flow:
      s: {type: script, script: "true"}
  keyed:
    input:
      env: {type: string, default: prod}
      priority: {type: integer, default: 0}
    queue: burst
    concurrency: {limit: 10000, key: "{{ input.env }}", priority: "{{ input.priority }}"}
    flow:
      s: {type: script, script: "true"}
`
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := enginetest.NewWith(b, enginetest.LoadWorkspace(b, yaml), enginetest.Options{NoWorker: true, Queues: map[string]int{"burst": 10000}})
			ctx, cancel := context.WithCancel(context.Background())
			var transitions atomic.Int64
			workers := fakeWorkers(ctx, b, f.Engine, 8, &transitions)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			start := time.Now()
			dones := make([]<-chan struct{}, b.N)
			var wg sync.WaitGroup
			const creators = 4
			for k := range creators {
				wg.Go(func() {
					for i := k; i < b.N; i += creators {
						j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: c.task,
							Input: map[string]any{"priority": i % 3}})
						if err != nil {
							b.Error(err)
							return
						}
						if dones[i], err = f.Engine.JobDone(ctx, j.ID); err != nil {
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
			elapsed := time.Since(start)
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			cancel()
			workers.Wait()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/job")
		})
	}
}
