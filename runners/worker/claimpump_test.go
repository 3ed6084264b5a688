package worker

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"
)

// stepsClaimer hands out steps named by the claims it gets, recording
// each claim's max; the first claim waits for gate.
type stepsClaimer struct {
	gate chan struct{}
	mu   sync.Mutex
	maxs []int
	next int
}

func (s *stepsClaimer) ClaimSteps(ctx context.Context, workerID string, max int) ([]*Assignment, error) {
	s.mu.Lock()
	first := len(s.maxs) == 0
	s.maxs = append(s.maxs, max)
	s.mu.Unlock()
	if first {
		select {
		case <-s.gate:
		case <-ctx.Done():
		}
		return nil, nil // no work yet
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var as []*Assignment
	for range max {
		s.next++
		as = append(as, &Assignment{JobID: "job", StepName: string(rune('a' + s.next - 1))})
	}
	return as, nil
}

// TestIdleSlotsShareOneClaim: the slots that want a step while a claim is
// out are asked for together in the next claim, and each gets its own.
func TestIdleSlotsShareOneClaim(t *testing.T) {
	w := &Worker{cfg: Config{MaxConcurrent: 3, IdlePause: time.Millisecond}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), id: "w"}
	sc := &stepsClaimer{gate: make(chan struct{})}
	p := newClaimPump(w, sc)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	go p.run(ctx)

	got := make(chan *Assignment, 3)
	slot := func() {
		a, err := p.next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- a
	}
	// One slot first: had all three wanted a step before the pump ran,
	// the first claim would have been for three.
	go slot()
	eventually(t, 10*time.Second, "the first claim out", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.maxs) == 1
	})
	// The other slots want a step meanwhile.
	go slot()
	go slot()
	eventually(t, 10*time.Second, "the other slots to want a step", func() bool { return len(p.wants) == 2 })
	close(sc.gate)
	seen := map[string]bool{}
	for range 3 {
		select {
		case a := <-got:
			if a == nil || seen[a.StepName] {
				t.Fatalf("a slot got %+v (seen %v)", a, seen)
			}
			seen[a.StepName] = true
		case <-time.After(10 * time.Second):
			t.Fatal("a slot got no step")
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.maxs) != 2 || sc.maxs[1] != 3 {
		t.Fatalf("claims asked for %v; want one slot's, then the three together", sc.maxs)
	}
}

// TestAWorkerFallsBackToOneClaimEachOnAnOlderServer: a server without
// POST /worker/claims (older than the worker) answers it 404 "no route";
// the worker's slots then claim one step each and report its start, as
// the interface has it, instead of taking the 404 for an unknown worker
// and registering again and again.
func TestAWorkerFallsBackToOneClaimEachOnAnOlderServer(t *testing.T) {
	var mu sync.Mutex
	handed := false
	srv := newWireServer(t, func(w http.ResponseWriter, r *request) {
		switch r.Path {
		case "/worker/register":
			writeJSON(w, 200, `{"worker_id": "11111111-2222-3333-4444-555555555555", "worker_secret": "s"}`)
		case "/worker/claims", "/worker/reports":
			writeJSON(w, 404, `{"error": "no route"}`)
		case "/worker/jobs/claim":
			mu.Lock()
			first := !handed
			handed = true
			mu.Unlock()
			if !first {
				writeJSON(w, 200, `{"job_id": null, "step_name": null, "action_spec": null}`)
				return
			}
			writeJSON(w, 200, `{"job_id": "j-1", "workspace": "main", "revision": "abc", "step_name": "s",
				"action_name": "s", "action_type": "script", "action_image": null, "runner": "local",
				"action_spec": {"type": "script", "script": "true"}, "input": {}}`)
		default:
			writeJSON(w, 200, `{"status": "ok"}`)
		}
	})
	cfg := testWorkerConfig()
	cfg.MaxConcurrent = 2
	startWorker(t, NewClient(srv.URL, "t", nil), cfg)
	eventually(t, 20*time.Second, "the step's start and completion", func() bool {
		var started, completed bool
		for _, r := range srv.requests() {
			started = started || r.Path == "/worker/jobs/j-1/steps/s/start"
			completed = completed || r.Path == "/worker/jobs/j-1/steps/s/complete"
		}
		return started && completed
	})
	registers := 0
	for _, r := range srv.requests() {
		if r.Path == "/worker/register" {
			registers++
		}
	}
	if registers != 1 {
		t.Errorf("the worker registered %d times, want once: the 404 is no route, not an unknown worker", registers)
	}
}
