package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxBatch caps how many commands one group commit takes, so one turn of
// the loop stays short under a flood of requests.
const maxBatch = 1024

// Load loads the active state from the store and recovers it (steps of
// vanished workers fail, pending hooks fire again, and so on), committing
// what recovery changed. Call it before Run to fail start-up on a store
// that cannot be loaded, before anything is served; Run loads by itself
// otherwise. It must not be called once Run has started.
func (e *Engine) Load(ctx context.Context) error {
	if e.started.Load() {
		return errors.New("engine: Load called after Run")
	}
	if err := e.load(ctx, true); err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	e.loaded = true
	return nil
}

// Run runs the orchestration loop until ctx ends, after loading the state
// (see Load) unless Load did already. Commands sent before Run starts wait
// for it.
//
// A failed commit is answered with its error to every command of the batch,
// and the loop then reloads its state from the store: memory may have run
// ahead of what is durable, and the store is the truth. If the reload fails
// too, Run stops with that error.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("engine: Run called twice")
	}
	defer e.shutdown()
	if !e.loaded {
		if err := e.load(ctx, true); err != nil {
			return fmt.Errorf("load state: %w", err)
		}
	}
	cmds := make([]*command, 0, maxBatch)
	for {
		cmds = cmds[:0]
		select {
		case c := <-e.cmds:
			cmds = append(cmds, c)
		case <-ctx.Done():
			return nil
		}
	drain:
		for len(cmds) < maxBatch {
			select {
			case c := <-e.cmds:
				cmds = append(cmds, c)
			default:
				break drain
			}
		}
		if err := e.runBatch(ctx, cmds); err != nil {
			return err
		}
	}
}

// runBatch applies every command to memory, commits what they changed in
// one transaction, then performs the side effects and answers them.
func (e *Engine) runBatch(ctx context.Context, cmds []*command) error {
	b := newBatch(e.clock.Now())
	for _, c := range cmds {
		c.res.val, c.res.err = c.apply(b)
	}
	// Claims are answered from memory, before the commit (see
	// state.claimed): the worker's start report, which must be durable
	// before it runs the step, comes in a later batch, so it follows this
	// commit. Should the commit fail, the state reloads without the claim
	// and its start report is refused.
	e.deliver(b)
	start := time.Now()
	if err := e.commit(ctx, b); err != nil {
		err = fmt.Errorf("commit: %w", err)
		e.log.Error("engine commit failed; reloading state from the store", "err", err)
		for _, c := range cmds {
			if c.reply != nil {
				c.reply <- result{err: err}
			}
		}
		if lerr := e.reload(ctx); lerr != nil {
			return fmt.Errorf("reload state after failed commit: %w", lerr)
		}
		return nil
	}
	if records := len(b.jobList) + len(b.stepList) + len(b.workerLst); records > 0 {
		e.metrics.Committed(len(cmds), records, time.Since(start))
	}
	e.finishBatch(b)
	for _, c := range cmds {
		if c.reply != nil {
			c.reply <- c.res
		}
	}
	return nil
}

// commit writes the batch, with the claims made since the last commit,
// unless it changed nothing durable: a batch of claims alone commits
// nothing (see state.claimed).
func (e *Engine) commit(ctx context.Context, b *batch) error {
	if b.empty() {
		return nil
	}
	for _, s := range e.st.claimed {
		b.dirtyStep(s)
	}
	e.commits.Add(1)
	err := e.cfg.Store.Commit(context.WithoutCancel(ctx), &Batch{Jobs: b.jobList, Steps: b.stepList, Workers: b.workerLst, Fires: b.fires, EventMarks: b.marks})
	if err == nil {
		clear(e.st.claimed)
		e.st.claimed = e.st.claimed[:0]
	}
	return err
}

// finishBatch performs a committed batch's side effects: timers, channels,
// server log lines, and the claims it answered.
func (e *Engine) finishBatch(b *batch) {
	for _, f := range b.after {
		f()
	}
	for _, js := range b.created {
		e.notify.add(js.job.ID)
	}
	e.observeBatch(b)
	e.feed.publish(b, func(id string) *Job {
		if js := e.st.jobs[id]; js != nil {
			return js.job
		}
		return nil
	})
	e.appendLogs(b)
	if ender, ok := e.cfg.Logs.(StepLogEnder); ok {
		for _, st := range b.ended {
			if err := ender.EndStep(st.JobID, st.Name); err != nil {
				e.log.Error("end step log", "job", st.JobID, "step", st.Name, "err", err)
			}
		}
	}
	for _, js := range b.finished {
		e.notify.finish(js.job.ID, js.job.Status == JobCancelled)
		if e.cfg.Logs != nil {
			e.cfg.Logs.Finish(js.job.ID)
		}
		e.secrets.drop(js.job.ID)
		stopTimer(&js.timer)
		delete(e.st.jobs, js.job.ID)
	}
	e.deliver(b)
}

// deliver answers the claims of the batch so far.
func (e *Engine) deliver(b *batch) {
	for _, d := range b.deliveries {
		d.w.got <- claimResult{claim: d.claim, err: d.err, render: d.render}
	}
	b.deliveries = b.deliveries[:0]
}

func (e *Engine) appendLogs(b *batch) {
	if e.cfg.Logs == nil || len(b.logs) == 0 {
		return
	}
	byJob := map[string][]LogLine{}
	var order []string
	for _, l := range b.logs {
		if _, ok := byJob[l.jobID]; !ok {
			order = append(order, l.jobID)
		}
		byJob[l.jobID] = append(byJob[l.jobID], l.line)
	}
	for _, id := range order {
		var err error
		if s, ok := b.logMasks[id]; ok {
			err = e.appendMasked(id, byJob[id], s.values())
		} else if err = e.AppendLog(id, byJob[id]); err != nil {
			// The orchestrator's own lines (about a job whose workspace
			// is gone, say) are still written: they are the server's
			// words, built from already masked messages, not a step's
			// output.
			err = e.cfg.Logs.Append(id, byJob[id])
		}
		if err != nil {
			e.log.Error("append server log lines", "job", id, "err", err)
		}
	}
}

// shutdown answers every parked claim with no work and marks the engine stopped.
func (e *Engine) shutdown() {
	if e.st != nil {
		for _, w := range e.st.waiters.drain() {
			w.got <- claimResult{}
		}
		e.st.stopTimers()
	}
	e.feed.close()
	close(e.stopped)
}
