package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

// Bounds of one log push: the server takes request bodies up to its
// limits.request_body (10MB by default).
//
// Once maxPushLines lines wait, a journal wakes delivery as a
// writer waiting for room does (room.waiting), rather than leaving them
// to the next tick of LogPushInterval: the interval gathers the lines of
// a step that prints a few into one push, and has nothing to gather for
// one that floods, whose lines it only held back (a step printing lines
// for half a second waited for its end before any went out).
const (
	maxPushLines = 5_000
	maxPushBytes = 4 << 20
)

// delivery is one step run on its way to the server.
type delivery struct {
	j   journal
	log *slog.Logger
	// finished is closed once the run's result is in the journal.
	finished <-chan struct{}
	// kill kills the step while it runs (nil for a run left by an
	// earlier worker process).
	kill context.CancelCauseFunc
	// refused is set once the server refused the run's lines: the rest are
	// dropped unsent.
	refused bool
	// dropLines is set once a stopped event source consumer gave up on
	// its lines (see deliver): the rest are dropped unsent.
	dropLines bool
	// ref and delivered, for a run a slot claimed: the reporter stops
	// tracking ref, then closes delivered, once the run is delivered.
	ref       StepRef
	delivered chan struct{}
	// handBack is set when the run was cut at the drain deadline and the
	// server takes such a step back (see HandBacker): its result is not
	// reported, the step is handed back instead.
	handBack atomic.Bool
	// raw is the space of the run's raw batches, for the next: two, the
	// batch being pushed in raw[cur] and the one read meanwhile in the
	// other.
	raw [2][]byte
	cur int
	// hold, when set, holds the result for the slot's next claim (see
	// resultPairer); it is ready once the result is queued, or once
	// delivering the finished run ended otherwise (an error, a refusal, a
	// hand-back), so the slot never waits for more than one attempt.
	hold *resultHold
}

// reporters deliver a claim slot's step runs: two goroutines for as long
// as the slot claims, rather than one per run, since a run's completion
// may still be on its way while the next run's lines go out (see
// claimLoop); each reuses one ticker for its runs' log pushes.
type reporters struct {
	runs chan *delivery
	done sync.WaitGroup
}

func (w *Worker) startReporters(lt lifetimes) *reporters {
	r := &reporters{runs: make(chan *delivery)}
	for range 2 {
		r.done.Add(1)
		go func() {
			defer r.done.Done()
			tick := stoppedTicker()
			for d := range r.runs {
				w.deliver(lt, d, tick)
				w.untrack(d.ref) // only once the server has the completion (or refused it)
				close(d.delivered)
			}
		}()
	}
	return r
}

// stop ends the reporters once they delivered what they were given.
func (r *reporters) stop() {
	close(r.runs)
	r.done.Wait()
}

// stoppedTicker returns a ticker to Reset when wanted.
func stoppedTicker() *time.Ticker {
	t := time.NewTicker(time.Hour)
	t.Stop()
	return t
}

// deliver sends a run's lines, then its result, until the server has them
// or refused them, retrying for as long as it takes with backoff capped at
// RetryMax: lines are pushed every LogPushInterval while the step runs and
// at once after, and at once when the step's output waits for room in a
// full journal. It returns early only when lt.reports ends, or after a
// failed attempt once the worker is stopping and the run is finished: the
// spool keeps what is left for the next start.
func (w *Worker) deliver(lt lifetimes, d *delivery, tick *time.Ticker) {
	ctx := lt.reports
	meta := d.j.Meta()
	b := newBackoff(w.cfg.RetryMin, w.cfg.RetryMax)
	tick.Reset(w.cfg.LogPushInterval)
	defer tick.Stop()
	finished := d.finished
	pushCtx := ctx
	if _, ok := d.j.(*eventGate); ok {
		// An event source's push may wait for room among its trigger's
		// jobs, which a stopping worker no longer runs: once stopping it
		// gives up, and what is left stays in the spool (or, in memory,
		// is lost: the events were never accepted, and the consumer's
		// next run emits them again after APPLIANCE_EVENT_OFFSET).
		var cancel context.CancelFunc
		pushCtx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-lt.shutdown:
				cancel()
			case <-pushCtx.Done():
			}
		}()
	}
	if d.hold != nil {
		defer w.releaseHeld(d)
	}
	for ctx.Err() == nil {
		wanted := d.j.Wanted()
		var emitted <-chan struct{} // nil: never, for other steps
		if g, ok := d.j.(*eventGate); ok {
			emitted = g.Emitted()
		}
		wasFinished := closed(d.finished)
		done, err := w.deliverOnce(pushCtx, d)
		if d.hold != nil && wasFinished {
			// The result is answered, or its attempt failed: the slot
			// claims without waiting, and a result sent again is not held
			// for a claim that may not carry it (one the slot sent before
			// the result was queued may be waiting for work).
			w.releaseHeld(d)
		}
		if done {
			return
		}
		if err != nil {
			if closed(d.finished) && closed(lt.shutdown) && pushCtx != ctx && ctx.Err() == nil {
				// A stopped consumer's push gave up waiting for room: its
				// events not yet accepted are dropped (its next run emits
				// them again, after APPLIANCE_EVENT_OFFSET), and its result
				// still goes to the server, which is there to take it.
				d.log.Info("worker stopping: the event source consumer's result goes to the server; its events not yet accepted, if any, are left to its next run", "err", err)
				d.dropLines = true
				pushCtx = ctx
				continue
			}
			if closed(d.finished) && closed(lt.shutdown) {
				j := d.j
				if g, ok := j.(*eventGate); ok {
					j = g.journal
				}
				if _, onDisk := j.(*spoolRun); onDisk {
					d.log.Warn("server unreachable at shutdown: the step's undelivered report stays in the spool for the next start", "err", err)
				} else {
					// In memory (an in-process worker's, or a spool that
					// could not be written): the server fails the attempt
					// as its vanished worker's, the next leader's recovery
					// for an in-process one, a missed heartbeat otherwise.
					d.log.Error("server unreachable at shutdown: the step's undelivered report is lost; the server fails this attempt with its worker, and the step's retries apply", "err", err)
				}
				return
			}
			d.log.Warn("step report failed; retrying", "run", meta.Run, "err", err)
			b.wait(ctx)
			continue
		}
		b.reset()
		select {
		case <-ctx.Done():
		case <-tick.C:
		case <-wanted: // the step's output waits for room
		case <-emitted: // an event source's event waits
		case <-finished:
			finished = nil // no more waiting: the result goes now
		}
	}
}

// releaseHeld releases the run's result from its slot's next claim (see
// resultPairer).
func (w *Worker) releaseHeld(d *delivery) {
	w.srv.(resultPairer).releaseHeld(d.hold)
}

// deliverOnce sends every pending line, then the result if the run has
// one. done is true once the run is delivered or refused, and removed.
func (w *Worker) deliverOnce(ctx context.Context, d *delivery) (done bool, err error) {
	meta := d.j.Meta()
	// Lines go as the spool holds them when the server sends them so (a
	// wrapper may want them decoded).
	rp, _ := w.srv.(rawPusher)
	rj, _ := d.j.(rawJournal)
	var next *batch // read while the push before was on its way
	for {
		var b batch
		var err error
		switch {
		case next != nil:
			b, next = *next, nil
			d.cur = 1 - d.cur
		case rp != nil && rj != nil:
			b, err = rj.PendingRaw(d.raw[d.cur], maxPushLines, maxPushBytes)
			d.keepRaw(d.cur, b)
		default:
			b, err = d.j.Pending(maxPushLines, maxPushBytes)
		}
		if err != nil {
			return false, fmt.Errorf("read the spool: %w", err)
		}
		if b.lines() > 0 {
			if d.refused || d.dropLines {
				_ = d.j.Ack(b)
				continue
			}
			push := LogPush{WorkerID: meta.WorkerID, StepName: meta.Step, Run: meta.Run, Lines: b.Lines}
			var cancelled bool
			var ahead readAhead
			if b.raw != nil {
				// The batch after b is read while the server takes b: the
				// worker's part of a push (reading the spool, coding the
				// body) then overlaps the server's rather than following
				// it. Pushes stay one at a time, in order; the batch read is
				// used only once b's push succeeded.
				done := make(chan struct{})
				go func() {
					defer close(done)
					ahead.b, ahead.err = rj.PendingRawAfter(d.raw[1-d.cur], b, maxPushLines, maxPushBytes)
				}()
				cancelled, err = rp.pushRaw(ctx, meta.JobID, push, b.raw)
				<-done // its buffer is the next read's
				d.keepRaw(1-d.cur, ahead.b)
			} else {
				cancelled, err = w.srv.PushLogs(ctx, meta.JobID, push)
			}
			switch {
			case err == nil:
				if err := d.j.Ack(b); err != nil {
					return false, err
				}
				if ahead.err == nil && ahead.b.lines() > 0 {
					next = &ahead.b
				}
				if cancelled && d.kill != nil {
					d.kill(runners.ErrStepCancelled)
				}
				if b.Result == nil {
					continue // more lines, or none yet
				}
			case refused(err):
				d.log.Warn("server refused the step's log: dropping its undelivered lines", "err", err)
				d.refused = true
				if d.kill != nil {
					d.kill(fmt.Errorf("the server refused the step's reports: %w", err))
				}
				continue
			default:
				return false, err
			}
		}
		if b.Result == nil {
			return false, nil
		}
		res := *b.Result
		attrs := []any{"exit_code", res.ExitCode, "duration", time.Since(meta.Created).Round(time.Millisecond)}
		if res.Error != nil {
			attrs = append(attrs, "error", firstLine(*res.Error))
		}
		done := "step finished"
		if hb, ok := w.srv.(HandBacker); ok && d.handBack.Load() {
			reason := fmt.Sprintf("the step did not end within drain_timeout (%s)", w.cfg.DrainTimeout)
			err = hb.HandBack(ctx, meta.WorkerID, meta.JobID, meta.Step, reason)
			done = "step stopped at the drain deadline and handed back: it runs again from the start"
		} else if rp, ok := w.srv.(resultPairer); ok && d.hold != nil {
			err = rp.completeHeld(ctx, meta.WorkerID, meta.JobID, meta.Step, res, d.hold)
		} else {
			err = w.srv.Complete(ctx, meta.WorkerID, meta.JobID, meta.Step, res)
		}
		switch {
		case err == nil:
			d.log.Info(done, attrs...)
		case refused(err):
			d.log.Warn("server refused the step's result (the step was recovered or its job is gone): dropped", append(attrs, "err", err)...)
		default:
			// The server is away: the result waits in the spool, which
			// must keep it now whatever happens to the machine.
			if perr := d.j.Persist(); perr != nil {
				d.log.Error("spool: cannot sync the step's result", "err", perr)
			}
			return false, err
		}
		d.j.Remove()
		return true, nil
	}
}

// readAhead is the batch read while the one before was pushed.
type readAhead struct {
	b   batch
	err error
}

// keepRaw keeps the space of b, read into raw[i], if it grew.
func (d *delivery) keepRaw(i int, b batch) {
	if cap(b.raw) > cap(d.raw[i]) {
		d.raw[i] = b.raw[:0]
	}
}

// refused reports whether the server will never take the run's reports:
// the step is not this worker's any more (409), its job is gone (404), or
// the run cannot prove the worker it ran as (403: a run spooled without
// its worker's secret).
func refused(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnknownWorker) ||
		permanent(err) && !errors.Is(err, ErrUnauthorized)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
