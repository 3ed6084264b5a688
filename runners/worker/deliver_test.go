package worker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

// lockedBuffer is a worker log the test reads while the worker writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runWorkerWithLog runs a worker logging into the returned buffer until the
// test ends.
func runWorkerWithLog(t *testing.T, srv Server, cfg Config) *lockedBuffer {
	t.Helper()
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := New(srv, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return logs
}

// spooledRuns counts the run directories in the spool.
func spooledRuns(t *testing.T, sp *Spool) int {
	t.Helper()
	entries, err := os.ReadDir(sp.dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}

func TestWorkerDeliversEveryLineAndTheResultAfterAnOutage(t *testing.T) {
	f := newFakeServer(t.TempDir())
	cfg := testWorkerConfig()
	sp, _ := openTestSpool(t, t.TempDir(), 0)
	cfg.Spool = sp
	dir := t.TempDir()
	f.enqueue(script("j1", "s", `for i in $(seq 1 50); do echo "line $i"; done
while [ ! -e "`+dir+`/go" ]; do sleep 0.02; done
for i in $(seq 51 100); do echo "line $i"; done
echo 'OUTPUT: {"done": true}'`))
	logs := runWorkerWithLog(t, f, cfg)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	})
	eventually(t, 20*time.Second, "the first lines to arrive", func() bool {
		n := 0
		f.with(func() { n = len(f.logs["j1/s"]) })
		return n >= 50
	})
	f.with(func() { f.down = true })
	writeFile(t, dir+"/go", "")
	// The step ends while the server is away; the worker keeps trying
	// long past what any single attempt's backoff (50ms at most) allows.
	eventually(t, 20*time.Second, "several failed reports", func() bool {
		return strings.Count(logs.String(), "step report failed; retrying") >= 10
	})
	if _, ok := f.result("j1/s"); ok {
		t.Fatal("result reported while the server was down")
	}
	f.with(func() { f.down = false })
	res := waitResult(t, f, "j1/s")
	if res.Error != nil || res.Output["done"] != true {
		t.Fatalf("result %+v", res)
	}
	f.with(func() {
		lines := f.logs["j1/s"]
		if n := len(lines); n == 0 || lines[n-1].Line != `OUTPUT: {"done": true}` {
			t.Fatalf("last line is not the OUTPUT line: %+v", lines)
		}
		wantNumbered(t, lines[:len(lines)-1], 1, 100)
		if f.logsAtComplete["j1/s"] != 101 {
			t.Fatalf("the result came after %d of 101 lines", f.logsAtComplete["j1/s"])
		}
	})
	eventually(t, 10*time.Second, "the spool to empty", func() bool { return sp.used.Load() == 0 && spooledRuns(t, sp) == 0 })
}

func TestWorkerDeliversWhatItsSpoolHoldsAtStart(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	mk := func(job string) *spoolRun {
		r, err := sp.create(runMeta{Run: randomID(), JobID: job, Step: "s", WorkerID: "w-old", Created: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			r.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d", i))
		}
		r.Flush() // as the step's output reader does once it read all there was
		return r
	}
	mk("finished").Finish(Result{Output: map[string]any{"ok": true}})
	mk("interrupted") // the worker process died while it ran
	mk("recovered").Finish(Result{})
	sp.Close()

	f := newFakeServer(t.TempDir())
	f.conflicts["recovered/s"] = true // the server failed it meanwhile
	cfg := testWorkerConfig()
	cfg.Spool, _ = openTestSpool(t, dir, 0)
	logs := runWorkerWithLog(t, f, cfg)

	res := waitResult(t, f, "finished/s")
	if res.WorkerID != "w-old" || res.Output["ok"] != true {
		t.Fatalf("finished run reported as %+v, want its result under the worker id it ran as", res)
	}
	res = waitResult(t, f, "interrupted/s")
	if res.WorkerID != "w-old" || res.ExitCode != runners.ExitKilled || !strings.Contains(errText(res), "Worker restarted while the step ran") {
		t.Fatalf("interrupted run reported as %+v (%q)", res, errText(res))
	}
	eventually(t, 10*time.Second, "the refused run to be dropped", func() bool {
		return strings.Contains(logs.String(), "server refused the step's log")
	})
	f.with(func() {
		wantNumbered(t, f.logs["finished/s"], 1, 3)
		wantNumbered(t, f.logs["interrupted/s"], 1, 3)
		if len(f.logs["recovered/s"]) != 0 {
			t.Fatalf("lines of a refused run were recorded: %+v", f.logs["recovered/s"])
		}
	})
	eventually(t, 10*time.Second, "the spool to empty", func() bool { return cfg.Spool.used.Load() == 0 && spooledRuns(t, cfg.Spool) == 0 })
}

func TestWorkerKeepsUndeliveredReportsInTheSpoolAtShutdown(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.down = true
	cfg := testWorkerConfig()
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	cfg.Spool = sp
	f.enqueue(script("j1", "s", `echo "line 1"; echo 'OUTPUT: {"n": 1}'`))
	stop, done := startWorker(t, f, cfg)
	eventually(t, 20*time.Second, "the step's result in the spool", func() bool {
		segs, _ := filepath.Glob(filepath.Join(dir, "*", "*"+segSuffix))
		for _, seg := range segs {
			if raw, _ := os.ReadFile(seg); bytes.Contains(raw, []byte(`"result":`)) {
				return true
			}
		}
		return false
	})
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop while its report was undeliverable")
	}
	sp.Close()
	sp2, _ := openTestSpool(t, dir, 0)
	runs := sp2.recover()
	if len(runs) != 1 {
		t.Fatalf("%d runs in the spool after shutdown, want the undelivered one", len(runs))
	}
	lines, res := drain(t, runs[0], 10)
	if len(lines) != 2 || lines[0].Line != "line 1" || res == nil || res.Output["n"] != 1.0 {
		t.Fatalf("spooled run: lines %+v, result %+v", lines, res)
	}
}

// TestWorkerStopsAStepWhoseReportsTheServerRefuses: once the server
// refuses a step's lines (it is not this worker's any more), running it on
// would be work nobody takes, so the worker kills it rather than let it
// sleep out its 300s.
func TestWorkerStopsAStepWhoseReportsTheServerRefuses(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.conflicts["j1/s"] = true
	f.enqueue(script("j1", "s", "echo first; sleep 300"))
	logs := runWorkerWithLog(t, f, testWorkerConfig())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker log:\n%s", logs)
		}
	})
	eventually(t, 30*time.Second, "the refused step to end", func() bool {
		return strings.Contains(logs.String(), "server refused the step's result")
	})
	if !strings.Contains(logs.String(), "server refused the step's log") {
		t.Fatal("the step ended without its log being refused")
	}
}

// A worker stopping while it retries a step's start report ran nothing,
// so lost nothing: the server recovers the step. It says so, and
// logs no error.
func TestStoppingBeforeAStepStartedLogsNoError(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.startErr = func(int) error { return errServerDown }
	f.enqueue(script("j1", "s", "echo never"))
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	w := New(f, testWorkerConfig(), slog.New(slog.NewTextHandler(logs, nil)))
	go func() { defer close(done); _ = w.Run(ctx) }()
	eventually(t, 10*time.Second, "start reports retried", func() bool {
		var n int
		f.with(func() { n = f.starts })
		return n >= 2
	})
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop")
	}
	out := logs.String()
	if strings.Contains(out, "level=ERROR") {
		t.Errorf("a stop before the step started logged an error:\n%s", out)
	}
	if !strings.Contains(out, "step not started") {
		t.Errorf("the log does not say the step was not started:\n%s", out)
	}
}

// TestQuietStepsResultStaysInTheRunsLogAtShutdown: a step that prints
// nothing, whose result the server cannot take, keeps it in the runs log
// (synced once the server did not take it), and the next process
// recovers it.
func TestQuietStepsResultStaysInTheRunsLogAtShutdown(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.down = true
	cfg := testWorkerConfig()
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	cfg.Spool = sp
	f.enqueue(script("j1", "s", `exit 3`))
	stop, done := startWorker(t, f, cfg)
	eventually(t, 20*time.Second, "the step's result in the runs log", func() bool {
		raw, _ := os.ReadFile(filepath.Join(dir, runsFile))
		return bytes.Contains(raw, []byte(`"exit_code":3`))
	})
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop while its report was undeliverable")
	}
	if n := spooledRuns(t, sp); n != 0 {
		t.Fatalf("%d run directories for a step that printed nothing", n)
	}
	sp.Close()
	sp2, _ := openTestSpool(t, dir, 0)
	runs := sp2.recover()
	if len(runs) != 1 {
		t.Fatalf("%d runs in the spool after shutdown, want the undelivered one", len(runs))
	}
	lines, res := drain(t, runs[0], 10)
	if len(lines) != 0 || res == nil || res.ExitCode != 3 || runs[0].meta.JobID != "j1" {
		t.Fatalf("spooled run: lines %+v, result %+v, meta %+v", lines, res, runs[0].meta)
	}
}
