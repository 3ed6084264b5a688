package worker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/local"
)

func testWorkerConfig() Config {
	return Config{
		Name:              "test-worker",
		Tags:              []string{"linux"},
		HeartbeatInterval: 50 * time.Millisecond,
		LogPushInterval:   50 * time.Millisecond,
		CancelWait:        time.Second,
		RetryMin:          10 * time.Millisecond,
		RetryMax:          50 * time.Millisecond,
		IdlePause:         20 * time.Millisecond,
		Runners:           map[string]runners.Runner{"local": local.New(local.Config{KillGrace: 200 * time.Millisecond})},
	}
}

// startWorker runs a worker until the test ends or stop is called; done
// receives Run's result.
func startWorker(t *testing.T, srv Server, cfg Config) (stop func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	w := New(srv, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	go func() { ch <- w.Run(ctx); close(ch) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return cancel, ch
}

func script(job, step, body string) *Assignment {
	return &Assignment{JobID: job, Workspace: "ws", StepName: step, ActionName: step, ActionType: "script",
		Runner: "local", ActionSpec: &workflow.Action{Type: "script", Script: body}}
}

func waitResult(t *testing.T, f *fakeServer, key string) Result {
	t.Helper()
	var res Result
	eventually(t, 20*time.Second, "completion of "+key, func() bool {
		r, ok := f.result(key)
		res = r
		return ok
	})
	return res
}

func waitStarted(t *testing.T, f *fakeServer, key string) {
	t.Helper()
	eventually(t, 20*time.Second, "start of "+key, func() bool {
		started := false
		f.with(func() {
			for _, e := range f.events {
				started = started || e == "start "+key
			}
		})
		return started
	})
}

func TestWorkerRunsClaimedStepAndPushesLogsBeforeCompleting(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.enqueue(script("j1", "build", `echo first; echo 'OUTPUT: {"ok": true}'; echo oops >&2; echo last`))
	startWorker(t, f, testWorkerConfig())

	res := waitResult(t, f, "j1/build")
	if res.Error != nil || res.Output["ok"] != true || res.WorkerID != "w1" {
		t.Fatalf("result %+v error %q, want ok output reported by w1", res, errText(res))
	}
	f.with(func() {
		if f.events[0] != "start j1/build" || f.events[len(f.events)-1] != "complete j1/build" {
			t.Errorf("events %v, want start first and complete last", f.events)
		}
		logs := f.logs["j1/build"]
		if f.logsAtComplete["j1/build"] != 4 || len(logs) != 4 {
			t.Fatalf("%d lines pushed before complete (%d in all), want all 4 before", f.logsAtComplete["j1/build"], len(logs))
		}
		// stdout and stderr are read apart, so only each stream keeps its order.
		var stdout []string
		stderr := ""
		for _, l := range logs {
			if l.TS.IsZero() {
				t.Errorf("line %q has no timestamp", l.Line)
			}
			if l.Stream == runners.Stdout {
				stdout = append(stdout, l.Line)
			} else {
				stderr += l.Line
			}
		}
		if strings.Join(stdout, "|") != `first|OUTPUT: {"ok": true}|last` || stderr != "oops" {
			t.Errorf("pushed lines %+v", logs)
		}
	})
}

func TestWorkerRunsUpToMaxConcurrentStepsAtOnce(t *testing.T) {
	f := newFakeServer(t.TempDir())
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 2
	// Each step waits until both have started, proving they overlap.
	dir := t.TempDir()
	body := `touch "` + dir + `/$APPLIANCE_STEP"; for i in $(seq 1 500); do [ -e "` + dir + `/a" ] && [ -e "` + dir + `/b" ] && exit 0; sleep 0.02; done; exit 1`
	f.enqueue(script("j1", "a", body))
	f.enqueue(script("j1", "b", body))
	startWorker(t, f, cfg)
	for _, k := range []string{"j1/a", "j1/b"} {
		if res := waitResult(t, f, k); res.Error != nil {
			t.Fatalf("%s failed: %s", k, errText(res))
		}
	}
	f.with(func() {
		if f.maxRunning != 2 {
			t.Fatalf("at most %d steps ran at once, want 2", f.maxRunning)
		}
	})
}

func TestCancelledJobKillsRunningStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		byPush bool
	}{
		{"through the cancellation long-poll", false},
		{"through the log push answer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t.TempDir())
			f.cancelOnlyByPush = tc.byPush
			// The step keeps printing so log pushes happen.
			f.enqueue(script("j1", "long", `while true; do echo tick; sleep 0.05; done`))
			startWorker(t, f, testWorkerConfig())
			waitStarted(t, f, "j1/long")
			began := time.Now()
			f.cancel("j1")
			res := waitResult(t, f, "j1/long")
			if errText(res) != runners.ErrStepCancelled.Error() || res.ExitCode == 0 {
				t.Fatalf("exit %d error %q, want the step killed as cancelled", res.ExitCode, errText(res))
			}
			if took := time.Since(began); took > 5*time.Second {
				t.Fatalf("cancellation took %s to reach the step", took)
			}
		})
	}
}

func TestStepTimeoutKillsStepAndReportsIt(t *testing.T) {
	f := newFakeServer(t.TempDir())
	a := script("j1", "slow", "sleep 60")
	a.TimeoutSecs = 0.3
	f.enqueue(a)
	startWorker(t, f, testWorkerConfig())
	res := waitResult(t, f, "j1/slow")
	if errText(res) != "Step timed out after 0.3s" || res.ExitCode == 0 {
		t.Fatalf("exit %d error %q", res.ExitCode, errText(res))
	}
}

func TestUnknownRunnerOrWorkspaceFailsStepWithClearError(t *testing.T) {
	f := newFakeServer(t.TempDir())
	a := script("j1", "contained", "true")
	a.Runner = "docker"
	f.enqueue(a)
	b := script("j2", "nows", "true")
	b.Workspace = "missing"
	f.enqueue(b)
	startWorker(t, f, testWorkerConfig())
	if res := waitResult(t, f, "j1/contained"); errText(res) != `unknown runner "docker" (this worker has: local)` {
		t.Fatalf("error %q", errText(res))
	}
	if res := waitResult(t, f, "j2/nows"); errText(res) != `fetch workspace "missing": workspace not found` {
		t.Fatalf("error %q", errText(res))
	}
}

func TestWorkerRegistersAgainWhenServerForgetsIt(t *testing.T) {
	f := newFakeServer(t.TempDir())
	startWorker(t, f, testWorkerConfig())
	eventually(t, 10*time.Second, "registration", func() bool {
		n := 0
		f.with(func() { n = f.registers })
		return n == 1
	})
	f.forget()
	eventually(t, 10*time.Second, "a new registration", func() bool {
		ok := false
		f.with(func() { ok = f.registers >= 2 && len(f.known) == 1 })
		return ok
	})
	f.enqueue(script("j1", "after", "true"))
	res := waitResult(t, f, "j1/after")
	if res.WorkerID == "w1" || res.WorkerID == "" {
		t.Fatalf("step reported by %q, want the new worker id", res.WorkerID)
	}
}

func TestRegisterRetriesUntilServerAnswers(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.registerErr = func(n int) error {
		if n <= 3 {
			return errors.New("connection refused")
		}
		return nil
	}
	f.enqueue(script("j1", "s", "true"))
	startWorker(t, f, testWorkerConfig())
	if res := waitResult(t, f, "j1/s"); res.WorkerID != "w1" {
		t.Fatalf("reported by %q", res.WorkerID)
	}
	f.with(func() {
		if f.registers != 4 {
			t.Fatalf("%d register calls, want 4", f.registers)
		}
	})
}

func TestRejectedTokenStopsWorkerWithClearMessage(t *testing.T) {
	f := newFakeServer(t.TempDir())
	f.registerErr = func(int) error { return &StatusError{Op: "register", Status: 401, sentinel: ErrUnauthorized} }
	_, done := startWorker(t, f, testWorkerConfig())
	select {
	case err := <-done:
		if !errors.Is(err, ErrUnauthorized) || err.Error() != "worker token rejected by server" {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("worker kept retrying a rejected token")
	}
}

func TestClaimErrorsBackOffInsteadOfBusyLooping(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		// most claims allowed in the window
		max int
	}{
		// Backoff between 10ms and 50ms, with jitter over the upper half.
		{"network errors", errors.New("connection reset"), 40},
		// A server answering "no work" at once: IdlePause (20ms) apart.
		{"empty answers at once", nil, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t.TempDir())
			f.claimErr = func(int) error { return tc.err }
			srv := Server(f)
			if tc.err == nil {
				srv = instantEmpty{f}
			}
			stop, _ := startWorker(t, srv, testWorkerConfig())
			eventually(t, 10*time.Second, "registration", func() bool {
				n := 0
				f.with(func() { n = f.registers })
				return n > 0
			})
			f.with(func() { f.claims = 0 })
			window := 500 * time.Millisecond
			time.Sleep(window) // counting calls over a period is the point here
			n := 0
			f.with(func() { n = f.claims })
			stop()
			if n < 3 || n > tc.max {
				t.Fatalf("%d claims in %s, want between 3 and %d", n, window, tc.max)
			}
		})
	}
}

// instantEmpty answers every claim at once with no work.
type instantEmpty struct{ *fakeServer }

func (s instantEmpty) Claim(ctx context.Context, workerID string, tags []string) (*Assignment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims++
	return nil, nil
}

func TestShutdownDrainsRunningStepsAndStopsClaiming(t *testing.T) {
	f := newFakeServer(t.TempDir())
	dir := t.TempDir()
	// The step ends only once the test has begun the shutdown.
	f.enqueue(script("j1", "draining", `while [ ! -e "`+dir+`/go" ]; do sleep 0.02; done; echo 'OUTPUT: {"drained": true}'`))
	stop, done := startWorker(t, f, testWorkerConfig())
	waitStarted(t, f, "j1/draining")
	stop()
	f.enqueue(script("j2", "late", "true"))
	writeFile(t, dir+"/go", "")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop after draining")
	}
	res, ok := f.result("j1/draining")
	if !ok || res.Error != nil || res.Output["drained"] != true {
		t.Fatalf("drained step result %+v (reported: %v)", res, ok)
	}
	if _, ok := f.result("j2/late"); ok {
		t.Fatal("a step was claimed after shutdown began")
	}
}

func TestShutdownKillsStepsStillRunningAtDrainTimeout(t *testing.T) {
	f := newFakeServer(t.TempDir())
	cfg := testWorkerConfig()
	cfg.DrainTimeout = 300 * time.Millisecond
	f.enqueue(script("j1", "stuck", "sleep 60"))
	stop, done := startWorker(t, f, cfg)
	waitStarted(t, f, "j1/stuck")
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop at the drain timeout")
	}
	res, ok := f.result("j1/stuck")
	if !ok || errText(res) != "worker shutting down" || res.ExitCode == 0 {
		t.Fatalf("result %+v error %q (reported: %v)", res, errText(res), ok)
	}
}

// handingBack is a server that takes back steps cut at the drain
// deadline (as the in-process transport does).
type handingBack struct {
	*fakeServer
	reasons map[string]string // by "job/step"
}

func (s handingBack) HandBack(ctx context.Context, workerID, jobID, step, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := jobID + "/" + step
	s.events = append(s.events, "handback "+key)
	s.reasons[key] = reason
	s.notify()
	return nil
}

// A step cut at the drain deadline is handed back, after its lines,
// to a server that takes it back, rather than reported failed.
func TestShutdownHandsBackStepsStillRunningAtDrainTimeout(t *testing.T) {
	f := newFakeServer(t.TempDir())
	srv := handingBack{fakeServer: f, reasons: map[string]string{}}
	cfg := testWorkerConfig()
	cfg.DrainTimeout = 300 * time.Millisecond
	f.enqueue(script("j1", "stuck", "echo before; sleep 60"))
	stop, done := startWorker(t, srv, cfg)
	eventually(t, 20*time.Second, "the step's line", func() bool {
		n := 0
		f.with(func() { n = len(f.logs["j1/stuck"]) })
		return n > 0
	})
	stop()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop at the drain timeout")
	}
	if res, ok := f.result("j1/stuck"); ok {
		t.Fatalf("the cut step was reported: %+v, want it handed back", res)
	}
	f.with(func() {
		want := "the step did not end within drain_timeout (300ms)"
		if got := srv.reasons["j1/stuck"]; got != want {
			t.Errorf("hand-back reason %q, want %q", got, want)
		}
		var order []string
		for _, e := range f.events {
			if strings.HasSuffix(e, " j1/stuck") {
				order = append(order, strings.Fields(e)[0])
			}
		}
		if len(order) < 3 || order[0] != "start" || order[1] != "logs" || order[len(order)-1] != "handback" {
			t.Errorf("events of the cut step %v, want start, its lines, then the hand-back", order)
		}
		if lines := f.logs["j1/stuck"]; len(lines) != 1 || lines[0].Line != "before" {
			t.Errorf("lines of the cut step %+v, want its one line", lines)
		}
	})
}

func TestCompletionIsRetriedOnErrorsButNotOnConflict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       func(n int) error
		completes int
		reported  bool
	}{
		{"network errors then success", func(n int) error {
			if n <= 2 {
				return errors.New("connection refused")
			}
			return nil
		}, 3, true},
		{"conflict", func(int) error { return &StatusError{Op: "complete step", Status: 409, sentinel: ErrConflict} }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeServer(t.TempDir())
			f.completeErr = tc.err
			f.enqueue(script("j1", "s", "true"))
			f.enqueue(script("j2", "next", "true"))
			startWorker(t, f, testWorkerConfig())
			// The worker moves on to the next step while the first's report
			// is still on its way, so wait for that report to settle.
			waitStarted(t, f, "j2/next")
			if tc.reported {
				waitResult(t, f, "j1/s")
			} else {
				eventually(t, 10*time.Second, "the refused report", func() bool {
					f.mu.Lock()
					defer f.mu.Unlock()
					return f.completes >= 1
				})
			}
			_, reported := f.result("j1/s")
			f.with(func() {
				if reported != tc.reported || f.completes < tc.completes {
					t.Fatalf("reported %v after %d complete calls, want %v after %d", reported, f.completes, tc.reported, tc.completes)
				}
				if !tc.reported && strings.Contains(strings.Join(f.events, ","), "complete j1/s") {
					t.Fatal("conflicting report recorded")
				}
			})
			if tc.name == "conflict" {
				f.with(func() {
					if f.completes > 2 { // j1 once, maybe j2 once
						t.Fatalf("%d complete calls: a conflict was retried", f.completes)
					}
				})
			}
		})
	}
}

// Heartbeats name each step from its claim until its completion is
// reported, so the server can tell a claim whose answer was lost.
func TestHeartbeatsReportTheStepsBeingRun(t *testing.T) {
	f := newFakeServer(t.TempDir())
	gate := filepath.Join(t.TempDir(), "gate")
	f.enqueue(script("j1", "long", `while [ ! -f `+gate+` ]; do sleep 0.02; done`))
	startWorker(t, f, testWorkerConfig())
	waitStarted(t, f, "j1/long")
	reported := func(want []StepRef) func() bool {
		return func() bool {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.reported) > 0 && reflect.DeepEqual(f.reported[len(f.reported)-1], want)
		}
	}
	eventually(t, 10*time.Second, "a heartbeat naming the running step", reported([]StepRef{{JobID: "j1", Step: "long"}}))
	writeFile(t, gate, "")
	waitResult(t, f, "j1/long")
	eventually(t, 10*time.Second, "a heartbeat naming no step", reported([]StepRef{}))
}
