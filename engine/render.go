package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// Defaults of the render limits (the server config's limits.template_time
// and limits.template_output).
const (
	DefaultTemplateTime   = 2 * time.Second
	DefaultTemplateOutput = 1 << 20
)

// defaultRenderSlots is how many renders may run at once: four per CPU,
// at least 16. A render that runs past its time limit is abandoned by its
// caller but keeps its slot until it returns (gonja cannot be stopped from
// outside; our guards stop it within a loop pass), so at most this many
// bombs run at any moment, each throttled to about a tenth of a CPU once
// it has run 50 ms (see template.Limits). Light renders take microseconds
// of a slot, but on a loaded machine a slot is held for as long as the
// goroutine waits to be scheduled: a few slots per CPU keep them from
// queueing behind one another while bombs hold some.
func defaultRenderSlots() int { return max(16, 4*runtime.GOMAXPROCS(0)) }

// renderPool runs template renders off the orchestrator goroutine, each in
// a goroutine of its own under the render limits, at most len(slots) at once.
type renderPool struct {
	lim   template.Limits
	slots chan struct{}

	// inflight counts renders the loop dispatched whose result it has not
	// applied yet (see Idle).
	mu       sync.Mutex
	inflight int
	idle     chan struct{} // closed when inflight drops to 0
	// hold, when set (tests only, see HoldRenders), keeps every render
	// from starting until it is closed.
	hold chan struct{}
}

func newRenderPool(lim template.Limits, slots int) *renderPool {
	idle := make(chan struct{})
	close(idle)
	return &renderPool{lim: lim, slots: make(chan struct{}, slots), idle: idle}
}

// slotWaits is how many render times a render may wait for a slot: a
// for_each of 10,000 instances queues its renders at once, and a loaded
// machine must not fail them, but a render must not wait forever either.
const slotWaits = 10

// run calls f with a context carrying the render limits and returns f's
// error, or a limit error once the time limit has passed, whether or not f
// has returned (f's results must then be dropped). A render waits for a
// slot at most slotWaits times the time limit, then fails without running.
func (p *renderPool) run(f func(ctx context.Context) error) error {
	p.mu.Lock()
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if !p.takeSlot() {
		wait := time.NewTimer(slotWaits * p.lim.Time)
		defer wait.Stop()
		select {
		case p.slots <- struct{}{}:
		case <-wait.C:
			return fmt.Errorf("no template render slot came free within %s (%d × limits.template_time): all %d are taken by running renders",
				slotWaits*p.lim.Time, slotWaits, cap(p.slots))
		}
	}
	ctx, cancel := context.WithTimeout(template.WithLimits(context.Background(), p.lim), p.lim.Time)
	done := make(chan error, 1)
	go func() {
		defer func() { <-p.slots }()
		defer cancel()
		done <- safely(ctx, f)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// The render's own guards notice the deadline within a loop pass
		// and say where (`when: template "...": ...`): give them a
		// quarter of the limit (0.1-1 s) before saying it without where.
		grace := time.NewTimer(min(max(p.lim.Time/4, 100*time.Millisecond), time.Second))
		defer grace.Stop()
		select {
		case err := <-done:
			return err
		case <-grace.C:
			return template.TimeLimitError(p.lim)
		}
	}
}

// takeSlot takes a free slot without waiting (and without a timer: the
// common case).
func (p *renderPool) takeSlot() bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// safely turns a panic in f into an error: a template must never take the
// server down.
func safely(ctx context.Context, f func(ctx context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("render: internal error: %v", r)
		}
	}()
	return f(ctx)
}

func (p *renderPool) begin() {
	p.mu.Lock()
	if p.inflight == 0 {
		p.idle = make(chan struct{})
	}
	p.inflight++
	p.mu.Unlock()
}

func (p *renderPool) end() {
	p.mu.Lock()
	p.inflight--
	if p.inflight == 0 {
		close(p.idle)
	}
	p.mu.Unlock()
}

func (p *renderPool) idleChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle
}

// Idle waits until every render the orchestrator handed off has come back
// and its result is committed. The test harness uses it to stay
// deterministic; the server never needs it.
func (e *Engine) Idle(ctx context.Context) error {
	for {
		select {
		case <-e.pool.idleChan():
		case <-ctx.Done():
			return ctx.Err()
		}
		// A result applied in the loop is committed before a later
		// command's answer; applying it may have dispatched more renders.
		if err := e.Ready(ctx); err != nil {
			var failed *commitError
			if errors.As(err, &failed) {
				continue // the state was reloaded: look again
			}
			return err
		}
		select {
		case <-e.pool.idleChan():
			return nil
		default:
		}
	}
}

// renderOff hands a step's render to the pool: work runs off the loop with
// the limits and returns what to do with its result, which the loop applies
// in a later batch, but only while the step still waits for it (a cancel,
// a timeout or a reload in between drops it). A render the pool fails (a
// limit, a panic) fails the step with prefix and the error.
func (e *Engine) renderOff(js *jobState, ss *stepState, prefix string, work func(ctx context.Context) func(b *batch)) {
	ss.renderGen++
	gen := ss.renderGen
	ss.rendering = true
	e.offLoop(work, func(b *batch, apply func(b *batch), err error) {
		if cur, ok := e.st.jobs[js.job.ID]; !ok || cur != js || js.job.Terminal() ||
			!ss.rendering || ss.renderGen != gen || ss.rec.Status != StepPending {
			return
		}
		ss.rendering = false
		if err != nil {
			e.fail(b, js, ss, prefix+err.Error())
			return
		}
		apply(b)
	})
}

// offLoop runs work in the render pool and, in a later batch of the loop,
// calls finish with what work returned, or with the pool's error (a limit
// tripped, a panic) and no result. Idle waits for finish.
func (e *Engine) offLoop(work func(ctx context.Context) func(b *batch), finish func(b *batch, apply func(b *batch), err error)) {
	e.pool.begin()
	go func() {
		var apply func(b *batch)
		err := e.pool.run(func(ctx context.Context) error { apply = work(ctx); return nil })
		sent := e.send(context.Background(), &command{apply: func(b *batch) (any, error) {
			defer e.pool.end()
			if err != nil {
				// An abandoned render may still be writing apply.
				finish(b, nil, err)
			} else {
				finish(b, apply, nil)
			}
			return nil, nil
		}})
		if sent != nil {
			e.pool.end()
		}
	}()
}
