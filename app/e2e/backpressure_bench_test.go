package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// benchLines is what one iteration of BenchmarkStepLogDelivery prints:
// 500,000 numbered lines of 100 bytes (50 MB).
const benchLines = 500_000

// benchFloodOf is a workspace whose task flood prints benchLines lines
// of seq's format (in which %09.0f is the line's number).
func benchFloodOf(format string) string {
	return fmt.Sprintf("tasks:\n  flood:\n    flow:\n      big:\n        type: script\n        script: seq -f \"%s\" 1 %d\n", format, benchLines)
}

// benchFlood's lines are 100 bytes of plain text; benchFloodColoured's
// are in a terminal colour with a tab, bytes a push escapes (a CI step's
// output is full of them), for BenchmarkStepLogDelivery/remote-escaped.
var (
	benchFlood         = benchFloodOf(`%09.0f $(head -c 90 /dev/zero | tr '\0' x)`)
	benchFloodColoured = benchFloodOf(`$(printf '\033[32m\t')%09.0f $(head -c 80 /dev/zero | tr '\0' x)$(printf '\033[0m')`)
)

// BenchmarkStepLogDelivery measures the lines per second a worker delivers
// from one step to the stored log, from the job's start to its end, with
// the default buffers (8 MB in process, a 1 GB spool remote), and the
// peak RSS of the server (this process: VmHWM, reset first) and of the
// remote worker. Run it alone:
//
//	go test ./app -run '^$' -bench StepLogDelivery -benchtime 3x
func BenchmarkStepLogDelivery(b *testing.B) {
	bigLog := func(c *config.Server) { c.Effective.Limits.StepLog = 1 << 30 }
	b.Run("in-process", func(b *testing.B) {
		ws := b.TempDir()
		writeWorkspace(b, ws, benchFlood)
		f := startFixture(b, map[string]string{"main": ws}, 1, bigLog)
		runDeliveryBench(b, f, nil)
	})
	for _, c := range []struct{ name, flood string }{{"remote", benchFlood}, {"remote-escaped", benchFloodColoured}} {
		b.Run(c.name, func(b *testing.B) {
			ws := b.TempDir()
			writeWorkspace(b, ws, c.flood)
			f := startFixture(b, map[string]string{"main": ws}, 0, bigLog, func(c *config.Server) { c.WorkerToken = workerToken })
			var w *workerProc
			if os.Getenv("APPLIANCE_BENCH_WORKER_INPROC") == "1" { // for profiles, see BenchmarkRemotePath
				runWorkerInTest(b, f.url, "bench-1", fastIntervals)
			} else {
				w = startWorkerProcess(b, f.url, workerToken, "bench-1", "")
			}
			waitUntil(b, "the worker to register", func() bool { return len(f.workers()) > 0 })
			runDeliveryBench(b, f, w)
		})
	}
}

func runDeliveryBench(b *testing.B, f *serverFixture, w *workerProc) {
	resetPeakRSS(b)
	workerCPU := func() time.Duration { return 0 }
	if w != nil {
		workerCPU = func() time.Duration { return processCPU(b, w.cmd.Process.Pid) }
	}
	cpu0, wcpu0 := cpuTime(b), workerCPU()
	b.ResetTimer()
	var took time.Duration
	for range b.N {
		began := time.Now()
		id := f.execute("main", "flood", nil)
		deadline := time.Now().Add(5 * time.Minute)
		for j := f.job(id); j.Status != "completed"; j = f.job(id) {
			if j.Status == "failed" || time.Now().After(deadline) {
				b.Fatalf("job %s is %s", id, j.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		took += time.Since(began)
	}
	b.StopTimer()
	lines := float64(benchLines * b.N)
	b.ReportMetric(lines/took.Seconds(), "lines/s")
	// The server's CPU a line: with the worker in this process
	// (APPLIANCE_BENCH_WORKER_INPROC), both sides.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/lines, "server-us/line")
	if w != nil {
		b.ReportMetric(float64((workerCPU()-wcpu0).Microseconds())/lines, "worker-us/line")
	}
	b.ReportMetric(float64(peakRSS(b, os.Getpid()))/(1<<20), "server-peak-MB")
	if w != nil {
		b.ReportMetric(float64(peakRSS(b, w.cmd.Process.Pid))/(1<<20), "worker-peak-MB")
	}
}

// resetPeakRSS starts this process's VmHWM afresh (Linux 4.0+).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS, it counts from the process start: %v", err)
	}
}
