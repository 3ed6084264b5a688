package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/local"
)

// Config configures a worker loop. Zero values are defaults.
type Config struct {
	Name          string
	Tags          []string
	MaxConcurrent int // steps run at once (default 1)
	// HeartbeatInterval is the time between heartbeats (default 30s).
	HeartbeatInterval time.Duration
	// LogPushInterval is the time between log pushes of a running step (default 1s).
	LogPushInterval time.Duration
	// DrainTimeout is how long running steps may go on after shutdown
	// begins before they are killed and reported failed, or handed back
	// to a server that takes them (see HandBacker) (default 10m).
	DrainTimeout time.Duration
	// Runners maps runner names to runners; "local" is added if missing.
	Runners map[string]runners.Runner

	// CancelWait is how long each cancellation long-poll waits (default 30s).
	CancelWait time.Duration
	// CancelPollDelay is how long a step runs before its cancellation is
	// long-polled (default 300ms): a short step costs no poll (a request
	// and, as the poll is abandoned when the step ends, a connection).
	CancelPollDelay time.Duration
	// RetryMin and RetryMax bound the backoff after errors (default 250ms
	// and 5s). Nothing gives up: the worker retries for as long as it runs.
	RetryMin, RetryMax time.Duration
	// IdlePause is the least time between two long-polls (claim or
	// cancellation) that came back empty, so a server answering at once
	// cannot make the worker spin (default 1s).
	IdlePause time.Duration
	// Spool keeps each step run's log lines and result on disk until the
	// server has them, and what an earlier process left is delivered at
	// start; nil keeps them in memory (the in-process pool).
	Spool *Spool
	// LogBuffer bounds, in bytes, the undelivered log lines a step run
	// holds in memory (default DefaultLogBuffer; at most 100,000 lines
	// too); past it the step's output waits for delivery.
	LogBuffer int64
}

func (c *Config) defaults() {
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = 1
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 30 * time.Second
	}
	if c.LogPushInterval <= 0 {
		c.LogPushInterval = time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Minute
	}
	if c.CancelWait <= 0 {
		c.CancelWait = 30 * time.Second
	}
	if c.CancelPollDelay <= 0 {
		c.CancelPollDelay = 300 * time.Millisecond
	}
	if c.RetryMin <= 0 {
		c.RetryMin = 250 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
	c.RetryMax = max(c.RetryMax, c.RetryMin)
	if c.IdlePause <= 0 {
		c.IdlePause = time.Second
	}
	runners := make(map[string]runners.Runner, len(c.Runners)+1)
	for name, r := range c.Runners {
		runners[name] = r
	}
	if runners["local"] == nil {
		runners["local"] = local.New(local.Config{})
	}
	c.Runners = runners
	c.Tags = append([]string(nil), c.Tags...)
}

// lifetimes are what a step run lives by while the worker runs.
type lifetimes struct {
	// steps ends when running steps must be killed: at the drain deadline,
	// or at once when the worker stops on an error.
	steps context.Context
	// reports ends when reports must stop: the worker stops on an error.
	reports context.Context
	// shutdown is closed once the worker is stopping.
	shutdown <-chan struct{}
}

// Worker registers with a server, claims steps and runs them.
type Worker struct {
	srv Server
	cfg Config
	log *slog.Logger

	// pump claims for the slots when the server hands several steps per
	// claim (nil otherwise: each slot claims its own). singleClaims: the
	// server turned out not to (ErrNoClaimsOfSeveral), so the slots claim
	// their own after all.
	pump         *claimPump
	singleClaims atomic.Bool

	regMu   sync.Mutex // serialises (re-)registration
	mu      sync.Mutex
	id      string
	running map[StepRef]struct{} // claimed and not yet reported complete
}

// New returns a worker claiming steps from srv.
func New(srv Server, cfg Config, log *slog.Logger) *Worker {
	cfg.defaults()
	if log == nil {
		log = slog.Default()
	}
	return &Worker{srv: srv, cfg: cfg, log: log.With("worker", cfg.Name), running: map[StepRef]struct{}{}}
}

// ID is the id the server gave this worker ("" before registration).
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}

// ErrStopNow, as the cause of the context Run was given, stops the worker
// without a drain: its running steps are killed at once and their
// reports dropped. The in-process pool of a replica that lost the
// leadership stops so: the new leader runs those steps again as their
// next attempt, and their results could no longer be reported anyway.
var ErrStopNow = errors.New("worker stopped at once")

// Run registers and then claims and runs steps until ctx ends. Shutdown is
// graceful: claiming stops, running steps may finish for DrainTimeout, then
// they are killed and reported failed (or handed back, see HandBacker).
// Run returns nil after a shutdown, or
// an error the worker cannot get past (a rejected token).
func (w *Worker) Run(ctx context.Context) error {
	if err := w.reregister(ctx, ""); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	w.log.Info("worker registered", "worker_id", w.ID(), "tags", w.cfg.Tags,
		"max_concurrent", w.cfg.MaxConcurrent)

	// Steps and reports outlive ctx: they drain, and are killed at the
	// drain deadline, or at once if the worker stops on an error.
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	stepsCtx, stopSteps := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopSteps(nil)
	// Reports outlive the drain deadline too: a run whose report fails
	// once the worker stops stays in the spool for the next start.
	reportsCtx, stopReports := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopReports(nil)
	lt := lifetimes{steps: stepsCtx, reports: reportsCtx, shutdown: ctx.Done()}
	loopsDone := make(chan struct{})
	go func() {
		select {
		case <-loopsDone:
			return
		case <-runCtx.Done():
		}
		if ctx.Err() == nil || errors.Is(context.Cause(ctx), ErrStopNow) {
			// Stopping on an error, or told to stop at once: nothing to
			// drain for.
			stopSteps(context.Cause(runCtx))
			stopReports(context.Cause(runCtx))
			return
		}
		w.log.Info("worker shutting down: draining running steps", "drain_timeout", w.cfg.DrainTimeout)
		select {
		case <-loopsDone:
		case <-time.After(w.cfg.DrainTimeout):
			stopSteps(runners.ErrShuttingDown)
		}
	}()

	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); w.heartbeats(hbCtx) }()

	var loops sync.WaitGroup
	if sc, ok := w.srv.(StepsClaimer); ok {
		w.pump = newClaimPump(w, sc)
		pumpDone := make(chan struct{})
		go func() { defer close(pumpDone); w.pump.run(runCtx) }()
		defer func() { stopRun(nil); <-pumpDone }()
	}
	if w.cfg.Spool != nil {
		// Read before the first claim, whose run the spool then also holds.
		leftovers := w.cfg.Spool.recover()
		loops.Add(1)
		go func() { defer loops.Done(); w.deliverLeftovers(lt, leftovers) }()
	}
	for range w.cfg.MaxConcurrent {
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := w.claimLoop(runCtx, lt); err != nil {
				stopRun(err)
			}
		}()
	}
	loops.Wait()
	close(loopsDone)
	stopHB()
	<-hbDone

	if err := context.Cause(runCtx); err != nil && ctx.Err() == nil {
		return err
	}
	w.log.Info("worker stopped")
	return nil
}

// reregister registers the worker, retrying while the server is
// unreachable, unless another goroutine already replaced the stale id.
func (w *Worker) reregister(ctx context.Context, stale string) error {
	w.regMu.Lock()
	defer w.regMu.Unlock()
	if w.ID() != stale {
		return nil
	}
	b := newBackoff(w.cfg.RetryMin, w.cfg.RetryMax)
	for {
		id, err := w.srv.Register(ctx, w.cfg.Name, w.cfg.Tags)
		if err == nil {
			w.mu.Lock()
			w.id = id
			w.mu.Unlock()
			if stale != "" {
				w.log.Warn("server forgot this worker: registered again", "old_id", stale, "worker_id", id)
			}
			return nil
		}
		if errors.Is(err, ErrUnauthorized) {
			return ErrUnauthorized
		}
		w.log.Warn("register with server failed; retrying", "err", err)
		if !b.wait(ctx) {
			return ctx.Err()
		}
	}
}

// heartbeats tells the server the worker is alive until ctx ends; it goes
// on while steps drain, so draining steps are not declared lost.
func (w *Worker) heartbeats(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		id := w.ID()
		err := w.srv.Heartbeat(ctx, id, w.runningSteps())
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, ErrUnknownWorker):
			if err := w.reregister(ctx, id); err != nil && ctx.Err() == nil {
				w.log.Error("register again failed", "err", err)
			}
		default:
			w.log.Warn("heartbeat failed", "err", err)
		}
	}
}

// track and untrack keep the set of steps the worker holds, which its
// heartbeats report.
func (w *Worker) track(ref StepRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[ref] = struct{}{}
}

func (w *Worker) untrack(ref StepRef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.running, ref)
}

func (w *Worker) runningSteps() []StepRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs := make([]StepRef, 0, len(w.running))
	for r := range w.running {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].JobID != refs[j].JobID {
			return refs[i].JobID < refs[j].JobID
		}
		return refs[i].Step < refs[j].Step
	})
	return refs
}

// claimLoop claims and runs one step at a time until ctx ends. Its error is
// one the worker cannot get past.
//
// The last step's completion report may still be on its way while the
// loop claims, starts and runs the next step; the loop waits for it once
// that step's process ends, so a slot has at most two reports outstanding,
// and none once it returns.
func (w *Worker) claimLoop(ctx context.Context, lt lifetimes) error {
	rep := w.startReporters(lt)
	var reporting <-chan struct{} // the last step's completion report
	// The last step's result, held for this slot's next claim (see
	// resultPairer); released once that claim is answered, or when none
	// goes out.
	var hold *resultHold
	release := func() {
		if hold != nil {
			w.srv.(resultPairer).releaseHeld(hold)
			hold = nil
		}
	}
	defer func() {
		release()
		if reporting != nil {
			<-reporting
		}
		rep.stop()
	}()
	b := newBackoff(w.cfg.RetryMin, w.cfg.RetryMax)
	for ctx.Err() == nil {
		id := w.ID()
		began := time.Now()
		var (
			a   *Assignment
			err error
		)
		pumped := w.pump != nil && !w.singleClaims.Load()
		if pumped {
			if hold != nil {
				// The claim carries the result: it goes once queued.
				select {
				case <-hold.queued:
				case <-ctx.Done():
				}
				a = w.claimCarrying(ctx, id)
			}
			if a == nil {
				a, err = w.pump.next(ctx)
				began = time.Now() // the pump paces claims that come back empty
			}
			release() // the claim took it, or it goes on its own now
		} else {
			release() // a claim of one carries no result
			a, err = w.srv.Claim(ctx, id, w.cfg.Tags)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, ErrNoClaimsOfSeveral) {
				if w.singleClaims.CompareAndSwap(false, true) {
					w.log.Warn("the server has no claims of several steps (it is older than this worker): each slot claims its own step and reports its start", "err", err)
				}
				continue
			}
			if errors.Is(err, ErrUnauthorized) {
				return ErrUnauthorized
			}
			if errors.Is(err, ErrUnknownWorker) {
				if err := w.reregister(ctx, id); err != nil {
					if errors.Is(err, ErrUnauthorized) {
						return err
					}
					continue
				}
			} else {
				w.log.Warn("claim failed; backing off", "err", err)
			}
			b.wait(ctx)
			continue
		}
		b.reset()
		if a == nil || a.JobID == "" {
			sleep(ctx, w.cfg.IdlePause-time.Since(began))
			continue
		}
		done, h := w.runAssignment(ctx, lt, rep, id, a, pumped)
		hold = h
		if reporting != nil {
			<-reporting
		}
		reporting = done
	}
	return nil
}

// claimCarrying claims a step for a slot with its last step's result,
// itself, when the pump's claim would have the result wait (see
// resultPairer.polling): a claim waiting for work is on its way for the
// worker's other slots (a chain's next step, say, the result makes ready,
// is then claimed with it, in one request and one commit). Nil when the
// slot is to ask the pump: no claim waits, or it brought no step.
func (w *Worker) claimCarrying(ctx context.Context, id string) *Assignment {
	rp := w.srv.(resultPairer)
	if ctx.Err() != nil || !rp.polling() {
		return nil
	}
	as, err := rp.claimCarrying(ctx, id, 1)
	if err != nil || len(as) == 0 {
		// The pump's claim meets the error again, and deals with it.
		return nil
	}
	if len(as) > 1 {
		w.log.Warn("the server handed more steps than claimed: leaving the rest to it", "claimed", 1, "got", len(as))
	}
	return as[0]
}

// retry calls f until it succeeds, fails permanently, or ctx ends. An
// attempt under way when ctx ends runs to its answer: a request cut short
// could leave the server thinking it done while the worker does not.
func (w *Worker) retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	b := newBackoff(w.cfg.RetryMin, w.cfg.RetryMax)
	for {
		err := f(context.WithoutCancel(ctx))
		if err == nil || permanent(err) {
			return err
		}
		w.log.Warn(what+" failed; retrying", "err", err)
		if !b.wait(ctx) {
			return fmt.Errorf("%s: stopped retrying: %w", what, context.Cause(ctx))
		}
	}
}

// deliverLeftovers delivers, one after the other, the step runs an earlier
// worker process left in the spool. A run without a result lost its step's
// process with that worker: it is reported failed after its lines.
func (w *Worker) deliverLeftovers(lt lifetimes, runs []*spoolRun) {
	if len(runs) > 0 {
		w.log.Info("spool: delivering the reports an earlier worker process left", "runs", len(runs))
	}
	done := make(chan struct{})
	close(done)
	tick := stoppedTicker()
	for _, r := range runs {
		if lt.reports.Err() != nil || closed(lt.shutdown) {
			return
		}
		m := r.Meta()
		log := w.log.With("job_id", m.JobID, "step", m.Step, "held_as", m.WorkerID)
		if p, ok := w.srv.(Prover); ok && m.Secret != "" {
			p.Remember(m.WorkerID, m.Secret)
		}
		// Kept only when the run has no result yet.
		r.Finish(runners.Failed(runners.ExitKilled, "Worker restarted while the step ran: its process was lost"))
		w.deliver(lt, &delivery{j: r, log: log, finished: done}, tick)
	}
}
