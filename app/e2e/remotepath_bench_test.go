package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
)

// BenchmarkRemotePath runs the same three loads through 4 in-process
// workers and through one remote `appliance worker` process of 4 slots
// (the server then runs none), side by side in one run, so the figures
// share the machine's load:
//
//	chain40:  a 40-step sequential chain of `true`, created -> completed
//	one-step: a one-step job, execute call -> job terminal
//	jobs1000: 1,000 one-step jobs at once, jobs/s
//
// With APPLIANCE_BENCH_WORKER_INPROC=1 the remote worker runs in the
// test's process (app.WorkerMain, still over HTTP on loopback and with its
// spool on disk), so -cpuprofile and -blockprofile see both sides.
func BenchmarkRemotePath(b *testing.B) {
	for _, load := range []string{"chain40", "one-step", "jobs1000"} {
		for _, where := range []string{"in-process", "remote"} {
			b.Run(load+"/"+where, func(b *testing.B) {
				benchSteps = 0
				f := remotePathFixture(b, where == "remote")
				switch load {
				case "chain40":
					timeChain40(b, f)
					benchSteps = 40 * b.N
				case "one-step":
					for b.Loop() {
						f.waitDone(f.execute("bench", "one", nil))
					}
					benchSteps = b.N
				case "jobs1000":
					thousandJobs(b, f)
					benchSteps = 1000 * b.N
				}
			})
		}
	}
}

// benchSteps counts the steps a BenchmarkRemotePath run took, for traceRequests.
var benchSteps int

// remotePathFixture serves the bench workspace with 4 in-process workers,
// or with none and one remote worker of 4 slots (warmed up: it has the
// workspace cached).
func remotePathFixture(b *testing.B, remote bool) *serverFixture {
	app.TuneRuntime()
	dir := b.TempDir()
	writeWorkspace(b, dir, chainWorkspace(40))
	if !remote {
		return startFixture(b, map[string]string{"bench": dir}, 4)
	}
	f := startFixture(b, map[string]string{"bench": dir}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	// The worker's default intervals: heartbeats and log pushes as deployed.
	const settings = "max_concurrent: 4\n"
	if os.Getenv("APPLIANCE_BENCH_WORKER_INPROC") == "1" {
		traceRequests(b, func() int { return benchSteps })
		runWorkerInTest(b, f.url, "bench", settings)
	} else {
		w := spawnWorker(b, f.url, workerToken, "bench", settings)
		f.workerCPU = func() time.Duration { return processCPU(b, w.cmd.Process.Pid) }
	}
	f.worker("bench")
	f.waitDone(f.execute("bench", "one", nil)) // the workspace is downloaded once
	return f
}

// runWorkerInTest runs app.WorkerMain in this process until the test ends.
func runWorkerInTest(b *testing.B, url, name, settings string) {
	dir := b.TempDir()
	path := filepath.Join(dir, "worker-config.yaml")
	cfg := fmt.Sprintf("server_url: %s\nworker_token: %s\nworker_name: %s\nworkspace_cache_dir: %s\nspool_dir: %s\ndrain_timeout: 2s\n%s",
		url, workerToken, name, filepath.Join(dir, "cache"), filepath.Join(dir, "spool"), settings)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- app.WorkerMain(ctx, path, io.Discard, io.Discard) }()
	b.Cleanup(func() {
		cancel()
		select {
		case <-code:
		case <-time.After(10 * time.Second):
			b.Error("the worker did not stop")
		}
	})
}

// timeChain40 runs the 40-step chain b.N times; reports created ->
// completed, and the commits a step.
func timeChain40(b *testing.B, f *serverFixture) {
	var total time.Duration
	commits := f.srv.engine.Commits()
	for b.Loop() {
		id := f.execute("bench", "chain", nil)
		f.waitDone(id)
		j := f.job(id)
		if j.Status != "completed" {
			b.Fatalf("chain %s", j.Status)
		}
		total += j.CompletedAt.Sub(j.CreatedAt)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/chain")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N*40)/1000, "ms/step")
	b.ReportMetric(float64(f.srv.engine.Commits()-commits)/float64(b.N*40), "commits/step")
}

// requestTimer wraps http.DefaultTransport (what the in-test worker's
// client uses) to count and time the worker's requests by endpoint, with
// APPLIANCE_BENCH_TRACE=1: where a remote step's milliseconds go.
type requestTimer struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
	took map[string]time.Duration
}

func (t *requestTimer) RoundTrip(req *http.Request) (*http.Response, error) {
	began := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		// The answer is in once its body is read; the body is small.
		raw, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		err = rerr
	}
	op := endpointOf(req.URL.Path)
	t.mu.Lock()
	t.n[op]++
	t.took[op] += time.Since(began)
	t.mu.Unlock()
	return resp, err
}

// endpointOf names a worker request by its route.
func endpointOf(path string) string {
	parts := strings.Split(strings.TrimPrefix(path, "/worker/"), "/")
	switch {
	case len(parts) >= 5 && parts[0] == "jobs" && parts[2] == "steps":
		return "step " + parts[4]
	case len(parts) >= 3 && parts[0] == "jobs":
		return "job " + parts[2]
	}
	return strings.Join(parts, "/")
}

// traceRequests installs a requestTimer and, at the end, logs per step.
func traceRequests(b *testing.B, steps func() int) {
	if os.Getenv("APPLIANCE_BENCH_TRACE") != "1" {
		return
	}
	t := &requestTimer{next: http.DefaultTransport, n: map[string]int{}, took: map[string]time.Duration{}}
	http.DefaultTransport = t
	b.Cleanup(func() {
		http.DefaultTransport = t.next
		n := steps()
		t.mu.Lock()
		defer t.mu.Unlock()
		for op, c := range t.n {
			b.Logf("%-22s %6.2f requests/step, %7.3f ms each", op, float64(c)/float64(n), float64(t.took[op].Microseconds())/1000/float64(c))
		}
	})
}

// processCPU is the user and system time a process used so far.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces): utime
	// and stime are the 12th and 13th, in clock ticks (100 a second).
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
