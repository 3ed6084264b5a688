package worker

import (
	"context"
	"io"
	"log/slog"
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
