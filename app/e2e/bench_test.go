package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// chainWorkspace is a task of n sequential steps that each run `true`.
func chainWorkspace(n int) string {
	var b strings.Builder
	b.WriteString("tasks:\n  chain:\n    flow:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "      s%d:\n        type: script\n        script: \"true\"\n", i)
		if i > 0 {
			fmt.Fprintf(&b, "        depends_on: [s%d]\n", i-1)
		}
	}
	b.WriteString("  one:\n    flow:\n      only:\n        type: script\n        script: \"true\"\n")
	return b.String()
}

func benchFixture(b *testing.B, workers int, storage ...func(*config.Server)) *serverFixture {
	app.TuneRuntime() // as `appliance serve` runs
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(40))
	return startFixture(b, map[string]string{"bench": dir}, workers, storage...)
}

// benchStores runs a benchmark on each store, one after the other in one
// run so the figures compare: bbolt, then PostgreSQL on a new database of
// the durable cluster (fsync and synchronous commits on) over its Unix
// socket.
func benchStores(b *testing.B, bench func(b *testing.B, storage ...func(*config.Server))) {
	b.Run("bbolt", func(b *testing.B) { bench(b) })
	b.Run("postgres", func(b *testing.B) { bench(b, postgresStorage(pgtest.Durable(b).Database(b))) })
}

// waitDone blocks until the engine reports the job terminal.
func (f *serverFixture) waitDone(id string) {
	done, err := f.srv.engine.JobDone(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		f.t.Fatalf("job %s did not finish", id)
	}
}

// BenchmarkChain40 runs a 40-step sequential chain of `true` through the
// in-process workers; reports created_at -> completed_at per chain.
func BenchmarkChain40(b *testing.B) { benchStores(b, chain40) }

func chain40(b *testing.B, storage ...func(*config.Server)) {
	timeChain40(b, benchFixture(b, 2, storage...))
}

// BenchmarkExecuteToCompletion measures a one-step job from the execute
// call to the job being terminal.
func BenchmarkExecuteToCompletion(b *testing.B) {
	benchStores(b, func(b *testing.B, storage ...func(*config.Server)) {
		executeToCompletion(b, benchFixture(b, 4, storage...))
	})
}

func executeToCompletion(b *testing.B, f *serverFixture) {
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.waitDone(f.execute("bench", "one", nil))
	}
}

// BenchmarkThousandJobs submits 1,000 one-step jobs (`true`) at once over
// HTTP to 4 in-process workers and waits for all of them; reports jobs per
// second, durable commits, and the process's CPU time and allocations per
// job (the client's included), which the machine's load does not skew.
func BenchmarkThousandJobs(b *testing.B) {
	benchStores(b, func(b *testing.B, storage ...func(*config.Server)) {
		thousandJobs(b, benchFixture(b, 4, storage...))
	})
}

// BenchmarkThousandJobsNoAudit is BenchmarkThousandJobs without the audit
// trail (no entry written): the baseline of its cost.
func BenchmarkThousandJobsNoAudit(b *testing.B) {
	app.TuneRuntime()
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(40))
	thousandJobs(b, startFixture(b, map[string]string{"bench": dir}, 4, func(c *config.Server) { c.Test.AuditOff = true }))
}

// BenchmarkExecuteToCompletionNoAudit is BenchmarkExecuteToCompletion
// without the audit trail.
func BenchmarkExecuteToCompletionNoAudit(b *testing.B) {
	app.TuneRuntime()
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(40))
	f := startFixture(b, map[string]string{"bench": dir}, 4, func(c *config.Server) { c.Test.AuditOff = true })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.waitDone(f.execute("bench", "one", nil))
	}
}

// BenchmarkThousandJobsNoSpawn is BenchmarkThousandJobs with a runner that
// spawns nothing: the cost of orchestration alone (HTTP in, commits, claim,
// start and completion reports), in steps per second.
func BenchmarkThousandJobsNoSpawn(b *testing.B) {
	benchStores(b, func(b *testing.B, storage ...func(*config.Server)) {
		app.TuneRuntime()
		dir := b.TempDir()
		writeWorkspace(b, dir, chainWorkspace(1))
		thousandJobs(b, startFixture(b, map[string]string{"bench": dir}, 4, append(storage, func(c *config.Server) {
			c.Test.Runners = map[string]runners.Runner{"local": noopRunner{}}
		})...))
	})
}

// BenchmarkForEachNoSpawn runs one job of 10,000 for_each instances
// through 4 in-process workers whose runner spawns nothing, on the real
// store: the orchestration's step rate (claim, start, completion, commits,
// instance bookkeeping), in steps per second.
func BenchmarkForEachNoSpawn(b *testing.B) { benchStores(b, forEachNoSpawn) }

func forEachNoSpawn(b *testing.B, storage ...func(*config.Server)) {
	app.TuneRuntime()
	dir := b.TempDir()
	const n = 10000
	writeWorkspace(b, dir, fmt.Sprintf("tasks:\n  fan:\n    flow:\n      fan:\n        type: script\n        script: \"true\"\n        for_each: \"{{ range(%d) | list }}\"\n", n))
	f := startFixture(b, map[string]string{"bench": dir}, 4, append(storage, func(c *config.Server) {
		c.Test.Runners = map[string]runners.Runner{"local": noopRunner{}}
	})...)
	commits := f.srv.engine.Commits()
	cpu := cpuTime(b)
	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		id := f.execute("bench", "fan", nil)
		f.waitDone(id)
		elapsed += time.Since(start)
		if j := f.job(id); j.Status != "completed" {
			b.Fatalf("job %s", j.Status)
		}
	}
	steps := float64(n * b.N)
	b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(f.srv.engine.Commits()-commits)/steps, "commits/step")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/steps, "cpu-us/step")
}

// noopRunner runs nothing and succeeds.
type noopRunner struct{}

func (noopRunner) Run(context.Context, *runners.Step) (int, error) { return 0, nil }

func thousandJobs(b *testing.B, f *serverFixture) {
	const jobs, clients = 1000, 64
	var elapsed time.Duration
	commits := f.srv.engine.Commits()
	cpu := cpuTime(b)
	var workerCPU time.Duration
	if f.workerCPU != nil {
		workerCPU = f.workerCPU()
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		ids := make(chan string, jobs)
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := c; k < jobs; k += clients {
					ids <- f.execute("bench", "one", nil)
				}
			}()
		}
		wg.Wait()
		close(ids)
		for id := range ids {
			f.waitDone(id)
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	n := float64(jobs * b.N)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(n/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(f.srv.engine.Commits()-commits)/n, "commits/job")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/n, "cpu-us/job")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/n, "allocs/job")
	if f.workerCPU != nil {
		b.ReportMetric(float64((f.workerCPU()-workerCPU).Microseconds())/n, "worker-cpu-us/job")
	}
}

// BenchmarkIdleServer measures the CPU an idle server uses (in-process
// workers parked on their claims, the scheduler and watcher waiting):
// reports CPU milliseconds per idle second and the Go heap in use.
func BenchmarkIdleServer(b *testing.B) {
	benchFixture(b, 2)
	time.Sleep(500 * time.Millisecond) // let start-up work settle before measuring
	before := cpuTime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-before).Microseconds())/1000/float64(b.N), "cpu-ms/s")
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MiB")
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
