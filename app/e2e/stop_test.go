package e2e

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

	"github.com/appliance-sh/appliance/app/config"
)

// lockedBuffer is a server log a test reads while the server writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errorLines returns the ERROR records of a text slog log.
func errorLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return out
}

// TestGracefulStopLosesNothingAndSaysNoError stops a server (as Ctrl-C
// does) while an in-process worker runs a long step and an event source's
// consumer, then starts it again on the same data: the stop logs no
// ERROR, the long step is handed back at the drain deadline and runs
// again at the next start, and the consumer starts again after the events the
// server accepted (the stopped one's waiting events are left to it), so
// each event makes one job.
func TestGracefulStopLosesNothingAndSaysNoError(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran-once")
	// While hold exists an event's job waits, so with max_in_flight 1 the
	// consumer's later events wait for room when the server stops.
	hold := filepath.Join(dir, "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeWorkspace(t, dir, fmt.Sprintf(`
tasks:
  long:
    flow:
      work:
        type: script
        script: |
          if [ -f %[1]q ]; then echo "second run"; exit 0; fi
          touch %[1]q
          echo "first run: waiting for the stop"
          sleep 600
  produce:
    flow:
      emit:
        type: script
        script: |
          i=$((APPLIANCE_EVENT_OFFSET + 1))
          while [ $i -le 5 ]; do echo "OUTPUT: {\"n\": $i}"; i=$((i + 1)); done
          sleep 600
  handle:
    input:
      n: {type: integer, required: true}
    flow:
      ok:
        type: script
        script: while [ -f %[2]q ]; do sleep 0.05; done
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    restart_policy: never
    max_in_flight: 1
`, marker, hold))
	cfg := testServerConfig(t, map[string]string{"ws": dir}, 3, func(c *config.Server) {
		// The long step is cut at the drain deadline, not waited for.
		c.Effective.DrainTimeout = 500 * time.Millisecond
	})
	var log lockedBuffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	srv, err := startServer(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	job := f.execute("ws", "long", nil)
	f.waitJob(job, "the long step to run", func(j jobView) bool {
		return strings.Contains(f.logs(job, "work"), "first run")
	})
	waitFor(t, "the first event's job", func() int { return len(listJobs(t, f.url, "ws", "handle")) },
		func(n int) bool { return n == 1 })

	if err := srv.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if errs := errorLines(log.String()); len(errs) > 0 {
		t.Errorf("a graceful stop logged errors:\n%s", strings.Join(errs, "\n"))
	}

	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	f = serveAgain(t, cfg, logger)
	j := f.waitTerminal(job)
	if j.Status != "completed" || !strings.Contains(f.logs(job, "work"), "second run") {
		t.Errorf("long job after the restart: %s, log %q; want completed by the step's second run", j.Status, f.logs(job, "work"))
	}
	// The stopped consumer's result was recorded (its job ended, saying
	// why), and the consumer starts again with the server (restart_policy
	// never is about a consumer that ends by itself), after the 3
	// accepted events.
	consumers := waitFor(t, "a second consumer", func() []targetJob { return listJobs(t, f.url, "ws", "produce") },
		func(js []targetJob) bool { return len(js) == 2 })
	first := consumers[0]
	if consumers[1].CreatedAt.Before(first.CreatedAt) {
		first = consumers[1]
	}
	stopped := f.job(first.JobID)
	if stopped.Status != "failed" || !strings.Contains(deref(stopped.step("emit").ErrorMessage), "worker shutting down") {
		t.Errorf("first consumer %s, emit error %q; want ended by the shutdown", stopped.Status, deref(stopped.step("emit").ErrorMessage))
	}
	// Each event made one job: the first (cut by the stop), then the 4
	// the stopped consumer had printed and the new one printed again.
	jobs := waitFor(t, "a job per event", func() []targetJob { return listJobs(t, f.url, "ws", "handle") },
		func(js []targetJob) bool {
			ended := 0
			for _, j := range js {
				if j.CompletedAt != nil {
					ended++
				}
			}
			return len(js) >= 5 && ended == len(js)
		})
	seen := map[float64]int{}
	for _, j := range jobs {
		n, _ := f.job(j.JobID).Input["n"].(float64)
		seen[n]++
	}
	for n := 1; n <= 5; n++ {
		if seen[float64(n)] != 1 {
			t.Errorf("event %d made %d jobs, want 1 (all: %v)", n, seen[float64(n)], seen)
		}
	}
	if errs := errorLines(log.String()); len(errs) > 0 {
		t.Errorf("errors logged:\n%s", strings.Join(errs, "\n"))
	}
}

// TestGracefulStopHandsBackAnInProcessStepThatRunsAgainAtTheNextStart
// stops a server while its in-process worker runs a step without retries
// that outlives the drain deadline, then starts it again on the same data:
// the step was handed back, not failed (a _server line says why), and
// runs again from the start, on the same attempt, to the job's end.
func TestGracefulStopHandsBackAnInProcessStepThatRunsAgainAtTheNextStart(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran-once")
	sleep := uniqueSleep()
	writeWorkspace(t, dir, fmt.Sprintf(`
tasks:
  long:
    flow:
      work:
        type: script
        script: |
          if [ -f %[1]q ]; then echo "second run"; exit 0; fi
          touch %[1]q
          echo "first run: waiting for the stop"
          %[2]s
      after:
        depends_on: [work]
        type: script
        script: echo after
`, marker, sleep))
	cfg := testServerConfig(t, map[string]string{"ws": dir}, 1, func(c *config.Server) {
		c.Effective.DrainTimeout = 300 * time.Millisecond
	})
	var log lockedBuffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	srv, err := startServer(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	job := f.execute("ws", "long", nil)
	waitSleepProcess(t, sleep)
	killAtCleanup(t, sleep)

	if err := srv.Shutdown(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := findProcessGroup(sleep); err == nil {
		t.Fatalf("the step's process %q outlived the shutdown", sleep)
	}
	f = serveAgain(t, cfg, logger)
	j := f.waitTerminal(job)
	work := f.logs(job, "work")
	if j.Status != "completed" || !strings.Contains(work, "first run") || !strings.Contains(work, "second run") {
		t.Fatalf("job after the restart: %s, work's log %q; want completed, both runs logged", j.Status, work)
	}
	if s := j.step("work"); s.Attempt != 1 || s.ErrorMessage != nil {
		t.Errorf("work: attempt %d, error %q; want attempt 1 (an interruption spends no retry) and no error", s.Attempt, deref(s.ErrorMessage))
	}
	if s := j.step("after"); s.Status != "completed" {
		t.Errorf("the step after the handed-back one: %s, want completed", s.Status)
	}
	want := `step "work" interrupted: the server shut down and the step did not end within drain_timeout (300ms); it is ready again and runs from the start`
	if logs := f.logs(job, "_server"); !hasLine(t, logs, "_server", "stderr", want) {
		t.Errorf("_server log lacks %q:\n%s", want, logs)
	}
	if errs := errorLines(log.String()); len(errs) > 0 {
		t.Errorf("errors logged:\n%s", strings.Join(errs, "\n"))
	}
}

// serveAgain starts the server again on cfg's data after a stop, shut down
// when the test ends.
func serveAgain(t *testing.T, cfg *config.Server, logger *slog.Logger) *serverFixture {
	t.Helper()
	srv, err := startServer(context.Background(), cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
}
