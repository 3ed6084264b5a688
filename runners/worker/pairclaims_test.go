package worker

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// chainServer is a wire-level server of one job, a chain of steps: a step
// is ready once the one before it has its result, whichever request
// brings it. A claim that brings no results and finds nothing ready waits
// for a step to be (a long-poll), or for the test's end.
type chainServer struct {
	*wireServer
	steps  []string
	script string

	mu       sync.Mutex
	handed   int               // steps handed out, in order
	ready    int               // steps ready: the first, then one a result
	by       map[string]string // step -> the path that brought its result
	claims   []string          // "[results] -> [steps]" of each claim answered
	polling  int               // claims waiting for work
	failLogs int               // log pushes to answer 503 first
	changed  chan struct{}     // closed and replaced when a step gets ready
	stop     chan struct{}
}

func newChainServer(t *testing.T, script string, steps ...string) *chainServer {
	t.Helper()
	s := &chainServer{steps: steps, script: script, ready: 1, by: map[string]string{},
		changed: make(chan struct{}), stop: make(chan struct{})}
	tgz := tarball(t, tarEntry{name: "README", body: "ws"})
	s.wireServer = newWireServer(t, func(w http.ResponseWriter, r *request) {
		switch r.Path {
		case "/worker/register":
			writeJSON(w, 200, `{"worker_id": "11111111-2222-3333-4444-555555555555", "worker_secret": "s"}`)
		case "/worker/claims":
			s.claim(w, r)
		case "/worker/jobs/j-1/logs":
			s.mu.Lock()
			fail := s.failLogs > 0
			s.failLogs--
			s.mu.Unlock()
			if fail {
				writeJSON(w, 503, `{"error": "busy"}`)
				return
			}
			writeJSON(w, 200, `{"status": "ok"}`)
		case "/worker/reports":
			names := s.record(r, "reports")
			writeJSON(w, 200, `{"results": [`+okAnswers(len(names))+`]}`)
		case "/worker/workspace/main.tar.gz":
			w.Header().Set("Content-Type", "application/gzip")
			w.Header().Set("X-Revision", "abc")
			w.Header().Set("ETag", `"abc"`)
			w.Write(tgz)
		default:
			writeJSON(w, 200, `{"status": "ok"}`)
		}
	})
	// Before the server closes, after the worker stops (cleanups run last
	// registered first).
	t.Cleanup(func() { close(s.stop) })
	return s
}

func okAnswers(n int) string {
	return strings.TrimSuffix(strings.Repeat(`{"status": 200},`, n), ",")
}

// record takes the results a request brings: each makes the next step
// ready.
func (s *chainServer) record(r *request, path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recordLocked(r, path)
}

// recordLocked is record with s.mu held.
func (s *chainServer) recordLocked(r *request, path string) []string {
	results, _ := r.Body["results"].([]any)
	var names []string
	for _, res := range results {
		name := res.(map[string]any)["step_name"].(string)
		names = append(names, name)
		s.by[name] = path
		s.ready = min(s.ready+1, len(s.steps))
	}
	if len(names) > 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return names
}

func (s *chainServer) claim(w http.ResponseWriter, r *request) {
	// Like the engine: the results and the claim in one turn, so the step
	// a result makes ready goes to this claim, not one waiting for work.
	s.mu.Lock()
	carried := s.recordLocked(r, "claims")
	max := int(r.Body["max"].(float64))
	var handed []string
	for {
		for s.handed < s.ready && len(handed) < max {
			handed = append(handed, s.steps[s.handed])
			s.handed++
		}
		if len(handed) > 0 || len(carried) > 0 {
			break
		}
		s.polling++
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-s.stop:
			writeJSON(w, 200, `{"assignments": []}`)
			return
		}
		s.mu.Lock()
		s.polling--
	}
	s.claims = append(s.claims, fmt.Sprintf("%v -> %v", carried, handed))
	s.mu.Unlock()
	var as []string
	for _, name := range handed {
		as = append(as, fmt.Sprintf(`{"job_id": "j-1", "workspace": "main", "revision": "abc", "step_name": %q,
			"action_name": %q, "action_type": "script", "runner": "local",
			"action_spec": {"type": "script", "script": %q}, "input": {}}`, name, name, s.script))
	}
	body := `{"assignments": [` + strings.Join(as, ",") + `]`
	if len(carried) > 0 {
		body += `, "results": [` + okAnswers(len(carried)) + `]`
	}
	writeJSON(w, 200, body+`}`)
}

// resultsBy returns the path that brought each step's result ("" when
// none has yet).
func (s *chainServer) resultsBy() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.steps))
	for i, name := range s.steps {
		out[i] = s.by[name]
	}
	return out
}

func (s *chainServer) answered() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.claims)
}

func pairingClient(t *testing.T, s *chainServer) *Client {
	return NewClient(s.URL, "t", nil, WithWorkspaceCache(t.TempDir()))
}

// TestAChainsNextStepIsClaimedWithThePreviousResult: a slot's result goes
// with the slot's next claim, in one request (one commit on the server),
// so the step the result makes ready is claimed by that very request; no
// result goes on its own.
func TestAChainsNextStepIsClaimedWithThePreviousResult(t *testing.T) {
	s := newChainServer(t, "true", "s1", "s2", "s3")
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 1
	startWorker(t, pairingClient(t, s), cfg)
	eventually(t, 20*time.Second, "every step's result", func() bool { return !slices.Contains(s.resultsBy(), "") })
	if by := s.resultsBy(); !slices.Equal(by, []string{"claims", "claims", "claims"}) {
		t.Errorf("results brought by %v; want each by the slot's next claim", by)
	}
	want := []string{"[] -> [s1]", "[s1] -> [s2]", "[s2] -> [s3]", "[s3] -> []"}
	if got := s.answered(); len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		t.Errorf("claims answered %q; want %q: each claim carries the last result and gets the step it made ready", got, want)
	}
}

// TestAResultIsNotHeldBehindALongPoll: with a claim waiting for work (for
// the worker's other slot), a slot's finished result does not wait for
// it: the slot claims on its own with the result, gets the chain's next
// step the result made ready, and the last result, which makes none
// ready, is answered at once, all while the long-poll is still out.
func TestAResultIsNotHeldBehindALongPoll(t *testing.T) {
	s := newChainServer(t, "sleep 0.3", "s1", "s2")
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 2
	startWorker(t, pairingClient(t, s), cfg)
	eventually(t, 10*time.Second, "a claim waiting for work", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.polling > 0
	})
	eventually(t, 5*time.Second, "the steps' results", func() bool { return !slices.Contains(s.resultsBy(), "") })
	if by := s.resultsBy(); !slices.Equal(by, []string{"claims", "claims"}) {
		t.Errorf("results brought by %v; want each by a claim of the slot's own", by)
	}
	got := s.answered()
	if !slices.Contains(got, "[s1] -> [s2]") || !slices.Contains(got, "[s2] -> []") {
		t.Errorf("claims answered %q; want the slot's own claims with its results, the first getting s2", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.polling == 0 {
		t.Error("no claim waits for work any more: the results were not answered beside it")
	}
}

// TestAStoppingSlotsResultGoesOnItsOwn: a slot that stops after its step
// (the worker drains) claims no more: the result it held for that claim
// goes on its own, and the worker stops.
func TestAStoppingSlotsResultGoesOnItsOwn(t *testing.T) {
	// The step marks that it runs: the server's answer handing it out may
	// still be on its way when the stop cancels the claim, and a step whose
	// answer is lost is the server's to put back, not the worker's to run.
	started := filepath.Join(t.TempDir(), "started")
	s := newChainServer(t, "touch '"+started+"'; sleep 0.3", "s1", "s2")
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 1
	stop, done := startWorker(t, pairingClient(t, s), cfg)
	eventually(t, 10*time.Second, "the step running", func() bool {
		_, err := os.Stat(started)
		return err == nil
	})
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	if by := s.resultsBy(); by[0] != "reports" || by[1] != "" {
		t.Errorf("results brought by %v; want the first by /worker/reports, no claim after the stop", by)
	}
}

// TestAResultRetriedAfterItsSlotClaimedIsNotHeld: a finished step's last
// lines fail to go; its slot claims without waiting for them (the claim
// waits for work, which the result would make ready), and the result,
// sent once the lines are in, goes on its own, not held for a claim that
// will not carry it.
func TestAResultRetriedAfterItsSlotClaimedIsNotHeld(t *testing.T) {
	s := newChainServer(t, "echo x", "s1", "s2")
	s.failLogs = 1
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 1
	startWorker(t, pairingClient(t, s), cfg)
	eventually(t, 5*time.Second, "every step's result", func() bool { return !slices.Contains(s.resultsBy(), "") })
	if by := s.resultsBy(); by[0] != "reports" {
		t.Errorf("results brought by %v; want s1's on its own", by)
	}
}
