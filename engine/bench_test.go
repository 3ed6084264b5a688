package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// fakeWorkers runs n instant workers through the public API until ctx
// ends, counting the transitions they cause (claim, start, complete).
func fakeWorkers(ctx context.Context, tb testing.TB, e *engine.Engine, n int, transitions *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := range n {
		id, err := e.RegisterWorker(ctx, fmt.Sprintf("bench-%d", i), nil, true, "")
		if err != nil {
			tb.Fatal(err)
		}
		wg.Go(func() {
			for {
				c, err := e.Claim(ctx, id, time.Minute)
				if err != nil || c == nil {
					if ctx.Err() != nil || errors.Is(err, engine.ErrStopped) {
						return
					}
					if err != nil {
						tb.Error(err)
						return
					}
					continue
				}
				err = e.StartStep(ctx, id, c.JobID, c.StepName)
				if err == nil {
					err = e.CompleteStep(ctx, id, c.JobID, c.StepName, engine.StepResult{Output: map[string]any{"ok": true}})
				}
				if err != nil {
					if ctx.Err() == nil { // not the end of the benchmark
						tb.Error(err)
					}
					return
				}
				transitions.Add(3)
			}
		})
	}
	return &wg
}

// BenchmarkOrchestratorTransitions drives diamond jobs (4 steps each)
// through several concurrent fake workers; one op is one job.
func BenchmarkOrchestratorTransitions(b *testing.B) {
	f := enginetest.NewWith(b, enginetest.LoadWorkspace(b, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [a]}
d: {action: ok, depends_on: [b, c]}`)), enginetest.Options{NoWorker: true})
	ctx, cancel := context.WithCancel(context.Background())
	var transitions atomic.Int64
	workers := fakeWorkers(ctx, b, f.Engine, 8, &transitions)
	commits := f.Store.Commits()

	b.ResetTimer()
	start := time.Now()
	dones := make([]<-chan struct{}, b.N)
	var wg sync.WaitGroup
	const creators = 4
	for c := range creators {
		wg.Go(func() {
			for i := c; i < b.N; i += creators {
				j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
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
	cancel()
	workers.Wait()

	b.ReportMetric(float64(transitions.Load())/elapsed.Seconds(), "transitions/s")
	b.ReportMetric(float64(4*b.N)/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(f.Store.Commits()-commits)/float64(b.N), "commits/job")
}

// BenchmarkChain40 runs one 40-step sequential chain per op with one
// instant worker: the latency of promotion, claim and commit in series.
func BenchmarkChain40(b *testing.B) {
	var flow strings.Builder
	flow.WriteString("s0: {action: ok}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&flow, "s%d: {action: ok, depends_on: [s%d]}\n", i, i-1)
	}
	benchChain(b, flow.String())
}

// BenchmarkChain40Templated is BenchmarkChain40 with templates to render
// at each step: its input (from the upstream output) and its script.
func BenchmarkChain40Templated(b *testing.B) {
	var flow strings.Builder
	flow.WriteString("s0: {action: greet}\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&flow, "s%d: {action: greet, depends_on: [s%d], input: {name: \"{{ s%d.output.ok }}\"}}\n", i, i-1, i-1)
	}
	benchChain(b, flow.String())
}

func benchChain(b *testing.B, flow string) {
	f := enginetest.NewWith(b, enginetest.LoadWorkspace(b, flowYAML(flow)), enginetest.Options{NoWorker: true})
	ctx, cancel := context.WithCancel(context.Background())
	var transitions atomic.Int64
	workers := fakeWorkers(ctx, b, f.Engine, 1, &transitions)

	b.ResetTimer()
	for range b.N {
		j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
		if err != nil {
			b.Fatal(err)
		}
		done, err := f.Engine.JobDone(ctx, j.ID)
		if err != nil {
			b.Fatal(err)
		}
		<-done
	}
	b.StopTimer()
	cancel()
	workers.Wait()
	b.ReportMetric(float64(transitions.Load())/b.Elapsed().Seconds(), "transitions/s")
}

// BenchmarkForEach runs one job of n for_each instances of `true` per op
// through 8 instant workers: steps/s is instances per second of the whole
// job, allocs/step the allocations per instance. The interface caps one
// for_each at 10,000 items, so 100k is ten parallel for_each steps.
func BenchmarkForEach(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			per := min(n, 10000)
			var flow strings.Builder
			for s := range n / per {
				fmt.Fprintf(&flow, "fan%d: {action: ok, for_each: \"{{ range(%d) | list }}\"}\n", s, per)
			}
			f := enginetest.NewWith(b, enginetest.LoadWorkspace(b, flowYAML(flow.String())), enginetest.Options{NoWorker: true})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var transitions atomic.Int64
			workers := fakeWorkers(ctx, b, f.Engine, 8, &transitions)
			var ms0, ms1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms0)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				j, err := f.Engine.CreateJob(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
				if err != nil {
					b.Fatal(err)
				}
				done, err := f.Engine.JobDone(ctx, j.ID)
				if err != nil {
					b.Fatal(err)
				}
				<-done
			}
			elapsed := b.Elapsed()
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			runtime.ReadMemStats(&ms1)
			cancel()
			workers.Wait()
			steps := float64(n * b.N)
			b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/steps, "allocs/step")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/steps, "B/step")
			// CPU time per step holds still on a loaded machine, where the
			// wall-clock rate does not.
			b.ReportMetric(float64(cpu.Microseconds())/steps, "cpu-us/step")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
