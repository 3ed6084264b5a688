package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// readiness tracks start-up for /readyz: ready once every part named at
// creation has reported in, until shutdown begins. What must hold before
// anything is served (the store loaded and recovered, the workspaces
// loaded) is done before the listener accepts; what finishes after (the
// in-process pool registering) is a part.
type readiness struct {
	mu       sync.Mutex
	pending  []string
	stopping bool
}

func newReadiness(parts ...string) *readiness { return &readiness{pending: parts} }

// done marks a part of start-up finished.
func (r *readiness) done(part string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pending {
		if p == part {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			return
		}
	}
}

// expect adds a part to wait for again (a replica that starts leading
// waits for its in-process workers as a starting server does).
func (r *readiness) expect(part string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		if p == part {
			return
		}
	}
	r.pending = append(r.pending, part)
}

// stop marks the server as shutting down: no longer ready for new work.
func (r *readiness) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
}

func (r *readiness) check(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.stopping:
		return errors.New("shutting down")
	case len(r.pending) > 0:
		return fmt.Errorf("starting: waiting for %s", r.pending[0])
	}
	return nil
}

// healthMinInterval is how long a health result is reused: each check
// writes (and fsyncs) the database, so a flood of unauthenticated
// /healthz calls costs at most one write per interval.
const healthMinInterval = time.Second

// healthCheck is /healthz: the orchestrator loop answers a no-op command
// and the database accepts a write.
type healthCheck struct {
	loop  func(ctx context.Context) error // engine round trip
	write func(ctx context.Context) error // tiny write transaction

	mu   sync.Mutex
	at   time.Time
	last error
}

func (h *healthCheck) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < healthMinInterval {
		return h.last
	}
	err := h.run(ctx)
	if errors.Is(err, context.Canceled) {
		return err // the caller left: nothing learnt about the server
	}
	h.last, h.at = err, time.Now()
	return err
}

func (h *healthCheck) run(ctx context.Context) error {
	if err := h.loop(ctx); err != nil {
		return fmt.Errorf("orchestrator loop does not answer: %w", err)
	}
	return h.write(ctx)
}
