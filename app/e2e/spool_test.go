package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// These tests prove a remote worker survives a server outage of any
// length: real `appliance serve` and `appliance worker` processes, the
// server killed with SIGKILL while a step runs, the step ending while the
// server is away.

// countingWorkspace's step prints lines 1..200, waits for the gate file,
// then prints lines 201..1000 and its output.
func countingWorkspace(gate string) string {
	return fmt.Sprintf(`tasks:
  count:
    flow:
      lines:
        type: script
        script: |
          for i in $(seq 1 200); do echo "line $i"; done
          while [ ! -e %q ]; do sleep 0.02; done
          i=201
          while [ $i -le 1000 ]; do
            echo "line $i"
            [ $((i %% 200)) -eq 0 ] && sleep 0.05
            i=$((i+1))
          done
          echo 'OUTPUT: {"lines": 1000}'
      after:
        depends_on: [lines]
        type: script
        script: echo after
`, gate)
}

// outageServer runs `appliance serve` for remote workers only, with a
// heartbeat timeout long enough that an outage does not fail their steps.
func outageServer(t *testing.T, yaml string) (*binaryServer, *serverFixture) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "server.yaml")
	writeFile(t, cfg, "worker_token: "+workerToken+"\nheartbeat_timeout: 10m\n")
	p := startBinaryServer(t, yaml, 0, "--config", cfg)
	return p, &serverFixture{t: t, url: "http://" + p.addr}
}

// outageSettings make a worker retry every 20ms..200ms, so an outage of a
// few seconds spans many attempts.
const outageSettings = "retry_min_interval: 20ms\nretry_max_interval: 200ms\n"

// killServer stops the server with SIGKILL and waits until it is gone.
func killServer(t *testing.T, p *binaryServer) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// spooledResult reports whether the worker's spool (at its default place)
// holds a step's result.
func spooledResult(t *testing.T, w *workerProc) bool {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(w.cache, ".spool", w.name, "*", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, seg := range segs {
		if raw, _ := os.ReadFile(seg); bytes.Contains(raw, []byte(`"result":`)) {
			return true
		}
	}
	return false
}

// wantEveryLineOnce checks the step's log is "line 1".."line n" in order,
// each once, then its OUTPUT line, and the step's output is recorded.
func wantEveryLineOnce(t *testing.T, f *serverFixture, id, step string, n int) {
	t.Helper()
	var got []string
	for _, raw := range strings.Split(strings.TrimSpace(f.logs(id, step)), "\n") {
		var l struct {
			Line string `json:"line"`
		}
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		got = append(got, l.Line)
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("line %d", i))
	}
	want = append(want, fmt.Sprintf(`OUTPUT: {"lines": %d}`, n))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		seen := map[string]int{}
		var dup, missing []string
		for _, l := range got {
			if seen[l]++; seen[l] == 2 {
				dup = append(dup, l)
			}
		}
		for _, l := range want {
			if seen[l] == 0 {
				missing = append(missing, l)
			}
		}
		t.Fatalf("step log has %d lines, want %d in order, each once; duplicated %v; missing %v", len(got), len(want), dup, missing)
	}
	j := f.job(id)
	if out, _ := j.step(step).Output.(map[string]any); out["lines"] != float64(n) {
		t.Fatalf("step output %v, want lines: %d", j.step(step).Output, n)
	}
}

func TestRemoteWorkerDeliversEveryLineOnceAfterAServerOutage(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	p, f := outageServer(t, countingWorkspace(gate))
	w := startWorkerProcess(t, f.url, workerToken, "steady", outageSettings)
	id := f.execute("ws", "count", nil)
	f.waitJob(id, "the first 200 lines", func(jobView) bool { return strings.Contains(f.logs(id, "lines"), `"line":"line 200"`) })

	killServer(t, p)
	writeFile(t, gate, "")
	waitUntil(t, "the step to end while the server is away", func() bool { return spooledResult(t, w) })
	// Before the spool the worker gave up on its reports after a budget
	// (two minutes); now nothing gives up. The outage goes on for many
	// attempts at the longest backoff.
	failed := strings.Count(w.stderr.String(), "step report failed; retrying")
	waitUntil(t, "the worker to retry its reports for a while", func() bool {
		return strings.Count(w.stderr.String(), "step report failed; retrying") >= failed+15
	})
	p.restart()

	j := f.waitTerminal(id)
	if j.Status != "completed" || j.step("after").Status != "completed" {
		t.Fatalf("job after the outage: %s: %+v", j.Status, j.Steps)
	}
	wantEveryLineOnce(t, f, id, "lines", 1000)
	if st := f.workerStatus(f.worker("steady").ID); st != "active" {
		t.Fatalf("worker after the outage is %s, want active", st)
	}
	waitUntil(t, "the spool to be emptied", func() bool {
		entries, _ := os.ReadDir(filepath.Join(w.cache, ".spool", w.name))
		for _, e := range entries {
			if e.IsDir() {
				return false // a run's directory
			}
			if e.Name() == "runs.log" {
				if info, err := e.Info(); err != nil || info.Size() > 0 {
					return false // runs without lines
				}
			}
		}
		return true
	})
}

func TestRestartedWorkerDeliversWhatItsSpoolHolds(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	p, f := outageServer(t, countingWorkspace(gate))
	w := startWorkerProcess(t, f.url, workerToken, "phoenix", outageSettings)
	first := f.worker("phoenix").ID
	id := f.execute("ws", "count", nil)
	f.waitJob(id, "the first 200 lines", func(jobView) bool { return strings.Contains(f.logs(id, "lines"), `"line":"line 200"`) })

	killServer(t, p)
	writeFile(t, gate, "")
	waitUntil(t, "the step to end while the server is away", func() bool { return spooledResult(t, w) })
	w.stop()
	if w.code != 0 || !strings.Contains(w.stderr.String(), "stays in the spool for the next start") {
		t.Fatalf("worker stopped with %d; stderr:\n%s", w.code, w.stderr.String())
	}

	// The worker starts again before the server is back.
	w.restart()
	p.restart()
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job: %s: %+v", j.Status, j.Steps)
	}
	if s := j.step("lines"); s.WorkerID == nil || *s.WorkerID != first {
		t.Fatalf("step reported by %v, want the worker id it was claimed as (%s)", s.WorkerID, first)
	}
	wantEveryLineOnce(t, f, id, "lines", 1000)
	if !strings.Contains(w.stderr.String(), "delivering the reports an earlier worker process left") {
		t.Fatalf("restarted worker did not say it delivers its spool:\n%s", w.stderr.String())
	}
}

// answerDropper forwards requests to target and, for every second log
// push, drops the connection after the server appended the lines: the
// worker sees an error and pushes the same lines again.
func answerDropper(t *testing.T, target string) (proxyURL string, dropped *atomic.Int64) {
	t.Helper()
	proxy, u := workerProxy(t, target)
	dropped = &atomic.Int64{}
	var pushes atomic.Int64
	return serveProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/logs") || r.Method != http.MethodPost || pushes.Add(1)%2 == 0 {
			proxy.ServeHTTP(w, r)
			return
		}
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = u.Scheme, u.Host, u.Host, ""
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				dropped.Add(1)
			}
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})), dropped
}

func TestLogPushWhoseAnswerWasLostIsNotAppendedTwice(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  count:
    flow:
      lines:
        type: script
        script: |
          i=1
          while [ $i -le 1000 ]; do
            echo "line $i"
            [ $((i % 100)) -eq 0 ] && sleep 0.15
            i=$((i+1))
          done
          echo 'OUTPUT: {"lines": 1000}'
`)
	proxyURL, dropped := answerDropper(t, f.url)
	startWorkerProcess(t, proxyURL, workerToken, "lossy", outageSettings)
	id := f.execute("main", "count", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	if dropped.Load() < 3 {
		t.Fatalf("only %d push answers dropped; the test needs several", dropped.Load())
	}
	wantEveryLineOnce(t, f, id, "lines", 1000)
	t.Logf("%d log push answers lost; every line once", dropped.Load())
}
