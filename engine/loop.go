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

// DefaultLinger: a batch nobody waits on (in-process workers' reports,
// timers) lingers up to Config.Linger before it is written while at least
// lingerRunning steps run on workers: their reports are coming and share
// its commit. Without it each commit carries one or two reports, and the
// commits (two fsyncs each) cost as much CPU as the rest of the
// orchestration. A lone job never lingers, so its latency is unchanged; a
// command someone waits on (an API call, a remote worker's report) ends
// the lingering at once.
const (
	DefaultLinger = 4 * time.Millisecond
	lingerRunning = 2
)

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
// The loop is pipelined: while one batch is being written (fsync'd) on
// another goroutine, the loop goes on applying commands to memory and
// answering claims into the next batch, which goes to the store as soon
// as the write before it is done. A command is answered, and its batch's
// side effects performed, only once its batch is durable (the in-process
// workers' reports excepted, see StartStepApplied), and batches become
// durable in the order they were applied.
//
// A failed write is answered with its error to every command of its batch
// and of the batch applied after it, and the loop then reloads its state
// from the store: memory ran ahead of what is durable, and the store is
// the truth. If the reload fails too, Run stops with that error.
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
	// One goroutine writes the batches, for as long as the loop runs: it
	// is handed one at a time, and is idle whenever the loop hands one.
	writes := make(chan *pending)
	defer close(writes)
	go func() {
		for p := range writes {
			p.done <- p.write(context.WithoutCancel(ctx))
		}
	}()
	var filling, writing *pending // applied to memory; being written
	// One timer, reused, ends a batch's lingering (see DefaultLinger):
	// real time, not the engine's clock, since it only paces the writes.
	linger := time.NewTimer(e.cfg.Linger)
	linger.Stop()
	defer linger.Stop()
	var lingering <-chan time.Time
	for {
		var cmds <-chan *command
		if filling == nil || len(filling.cmds) < maxBatch {
			cmds = e.cmds // a full batch waits for the write before it
		}
		var written <-chan error
		if writing != nil {
			written = writing.done
		}
		select {
		case c := <-cmds:
			if filling == nil {
				filling = &pending{b: newBatch(e.clock.Now())}
			}
			e.apply(filling, c)
		case err := <-written:
			if err := e.written(ctx, writing, &filling, err); err != nil {
				return err
			}
			writing = nil
		case <-lingering:
			lingering = nil
			filling.lingered = true
		case <-ctx.Done():
			// What was taken is answered before the loop stops.
			if writing != nil {
				if err := e.written(ctx, writing, &filling, <-writing.done); err != nil {
					return err
				}
			}
			if filling != nil {
				e.write(writes, filling)
				return e.written(ctx, filling, nil, <-filling.done)
			}
			e.flushAudit(writes)
			return nil
		}
		if writing == nil && filling != nil {
			if e.lingers(filling) {
				if lingering == nil {
					linger.Reset(e.cfg.Linger)
					lingering = linger.C
				}
				continue
			}
			if lingering != nil {
				linger.Stop()
				lingering = nil
			}
			writing, filling = filling, nil
			e.held.Add(-int64(len(writing.cmds)))
			e.write(writes, writing)
		}
	}
}

// flushAudit writes, in a last commit, the entries still queued when the
// loop stops (denied requests whose wake-up lost the race with the stop,
// or found the command channel full): the server logs the chain's head
// after the orchestrator stops, and that head should include them. A
// batch of commands, when there is one, takes them instead (prepareCommit).
// A failure loses only these entries, so it is logged, not returned.
func (e *Engine) flushAudit(writes chan<- *pending) {
	n := 0
	if e.cfg.Audit != nil {
		n = e.cfg.Audit.Len()
	}
	if n == 0 {
		return
	}
	p := &pending{b: newBatch(e.clock.Now())}
	e.write(writes, p)
	if err := <-p.done; err != nil {
		e.log.Error("audit: the last commit of queued entries failed; they are lost", "entries", n, "err", err)
	}
}

// pending is a batch applied to memory and not yet durable, with the
// commands that made it.
type pending struct {
	b       *batch
	cmds    []*command
	effects func()                      // what the batch tells the world once durable (see effectsOf)
	early   int                         // commands answered once applied (see doApplied)
	write   func(context.Context) error // makes the batch durable
	done    chan error                  // the write's outcome
	began   time.Time
	// awaited: a command of the batch waits for it to be durable;
	// lingered: it waited for more (see DefaultLinger) and is written next.
	awaited, lingered bool
}

// lingers says whether the batch being filled should wait for more before
// it is written (see DefaultLinger).
func (e *Engine) lingers(p *pending) bool {
	if p.awaited || p.lingered || len(p.cmds) >= maxBatch || p.b.empty() || len(p.b.durable) > 0 {
		return false
	}
	running := 0
	for _, w := range e.st.workers {
		if running += len(w.running); running >= lingerRunning {
			return true
		}
	}
	return false
}

// apply applies c, and what else is queued (up to maxBatch commands), to
// the batch being filled, and answers the claims they settled: claims are
// answered from memory, before any commit (see state.claimed).
func (e *Engine) apply(p *pending, c *command) {
	for {
		p.cmds = append(p.cmds, c)
		c.res.val, c.res.err = c.apply(p.b)
		e.held.Add(1)
		if c.applied && c.reply != nil {
			c.reply <- c.res
			p.early++
		}
		if c.reply != nil && !c.applied {
			p.awaited = true
		}
		if len(p.cmds) >= maxBatch {
			break
		}
		select {
		case c = <-e.cmds:
			continue
		default:
		}
		break
	}
	e.endStepLogs(p.b)
	e.deliver(p.b)
}

// endStepLogs tells the log of each step run the batch ended so far, as
// the run ends rather than once the batch is durable: its worker, and the
// next steps, go on meanwhile (see CompleteStepApplied), and a run's last
// words (a step_log warning) belong before the lines of the steps after
// it. Like a worker's pushed lines, they are not undone by a failed write.
func (e *Engine) endStepLogs(b *batch) {
	if ender, ok := e.cfg.Logs.(StepLogEnder); ok {
		for _, st := range b.ended[b.endsLogged:] {
			if err := ender.EndStep(st.JobID, st.Name); err != nil {
				e.log.Error("end step log", "job", st.JobID, "step", st.Name, "err", err)
			}
		}
	}
	b.endsLogged = len(b.ended)
}

// write sends a batch to the store: its records are encoded here, on the
// loop, and written and fsync'd by the writer (see Run); p.done gets the
// outcome. A batch that changed nothing durable (claims alone, reads) is
// done at once.
func (e *Engine) write(writer chan<- *pending, p *pending) {
	p.done = make(chan error, 1)
	p.began = time.Now()
	var err error
	p.write, err = e.prepareCommit(p.b)
	if err == nil {
		p.effects = e.effectsOf(p.b)
	}
	if err != nil || p.write == nil {
		p.done <- err
		return
	}
	writer <- p
}

// written finishes a batch whose write ended with err. On success it
// performs the batch's side effects and answers its commands. On failure
// it answers them, and those of the batch applied since (*next), with the
// error, and reloads the state from the store.
func (e *Engine) written(ctx context.Context, p *pending, next **pending, err error) error {
	if err != nil {
		err = &commitError{err}
		e.log.Error("engine commit failed; reloading state from the store", "err", err)
		answerAll(p.cmds, err)
		failDurable(p.b, err)
		early := p.early
		if next != nil && *next != nil {
			answerAll((*next).cmds, err)
			failDurable((*next).b, err)
			e.held.Add(-int64(len((*next).cmds)))
			early += (*next).early
			*next = nil
		}
		if early > 0 {
			// In-process workers run steps whose starts the store will
			// not have: reloaded, the engine would hand them out again.
			// Stopping stops those steps with the server (the step
			// keeper), and the next start recovers from the store.
			return fmt.Errorf("%w, after accepting %d in-process step starts: stopping", err, early)
		}
		if lerr := e.reload(ctx); lerr != nil {
			return fmt.Errorf("reload state after failed commit: %w", lerr)
		}
		return nil
	}
	if records := len(p.b.jobList) + len(p.b.stepList) + len(p.b.workerLst); records > 0 {
		e.metrics.Committed(len(p.cmds), records, time.Since(p.began))
	}
	e.finishBatch(p.b, p.effects)
	for _, c := range p.cmds {
		if c.reply != nil && !c.applied {
			c.reply <- c.res
		}
	}
	return nil
}

// commitError is a failed write's answer to the commands of its batch and
// of the batch applied after it: none of them took effect, and the engine
// reloaded its state from the store (or stopped).
type commitError struct{ err error }

func (c *commitError) Error() string { return "commit: " + c.err.Error() }
func (c *commitError) Unwrap() error { return c.err }

// failDurable answers the claims a failed batch would have answered once
// durable: nothing was claimed.
func failDurable(b *batch, err error) {
	for _, d := range b.durable {
		d.w.got <- claimResult{err: err}
	}
	b.durable = nil
}

func answerAll(cmds []*command, err error) {
	for _, c := range cmds {
		if c.reply != nil && !c.applied {
			c.reply <- result{err: err}
		}
	}
}

// prepareCommit takes the batch's records, with the claims made since the
// last commit, for the store: nil when the batch changed nothing durable
// (a batch of claims alone commits nothing, see state.claimed). The
// returned write makes them durable; the records may change as soon as
// prepareCommit returns.
//
// The batch's `_server` lines are stored first: a line that says why a
// step or job ended is in the log before the store says it ended, so a
// reader who sees a failed job finds why in its log at once. Like a
// worker's pushed lines, they are not undone by a failed write.
func (e *Engine) prepareCommit(b *batch) (func(context.Context) error, error) {
	e.appendLogs(b)
	if e.cfg.Audit != nil {
		b.audit = append(b.audit, e.cfg.Audit.Take()...)
	}
	if b.empty() {
		return nil, nil
	}
	for _, s := range e.st.claimed {
		b.dirtyStep(s)
	}
	clear(e.st.claimed)
	e.st.claimed = e.st.claimed[:0]
	e.commits.Add(1)
	rec := &Batch{Jobs: b.jobList, Steps: b.stepList, Workers: b.workerLst, Fires: b.fires, EventMarks: b.marks, Audit: b.audit}
	if ps, ok := e.cfg.Store.(PreparingStore); ok {
		return ps.PrepareCommit(rec)
	}
	// A store that reads the records while writing is written to here,
	// on the loop, before they can change.
	err := e.cfg.Store.Commit(context.Background(), rec)
	return nil, err
}

// commit writes the batch at once, on the loop (start-up recovery).
func (e *Engine) commit(ctx context.Context, b *batch) error {
	write, err := e.prepareCommit(b)
	if err != nil || write == nil {
		return err
	}
	return write(context.WithoutCancel(ctx))
}

// effectsOf takes what a batch tells the world once it is durable (job
// and step events, metrics) from its records, which may change before it
// is, as the loop goes on.
func (e *Engine) effectsOf(b *batch) func() {
	events := e.feed.collect(b, func(id string) *Job {
		if js := e.st.jobs[id]; js != nil {
			return js.job
		}
		return nil
	}, func(j *Job) int {
		if js := e.st.jobs[j.ID]; js != nil {
			return e.position(js)
		}
		return 0
	})
	observe := e.observations(b)
	return func() {
		observe()
		e.feed.send(events)
	}
}

// finishBatch performs a committed batch's side effects: timers, channels,
// events, and the claims it answered (its server log lines are stored
// before it is written, see prepareCommit).
func (e *Engine) finishBatch(b *batch, effects func()) {
	for _, f := range b.after {
		f()
	}
	effects()
	e.endStepLogs(b)
	for _, js := range b.finished {
		e.notify.finish(js.job.ID, js.job.Status == JobCancelled)
		if e.cfg.Logs != nil {
			e.cfg.Logs.Finish(js.job.ID)
		}
		e.secrets.drop(js.job.ID)
		stopTimer(&js.timer)
		if e.st.jobs[js.job.ID] == js { // not reloaded since
			delete(e.st.jobs, js.job.ID)
		}
	}
	e.deliver(b)
	e.deliverDurable(b)
}

// deliver answers the claims of the batch so far.
func (e *Engine) deliver(b *batch) {
	for _, d := range b.deliveries {
		d.w.got <- d.result
	}
	b.deliveries = b.deliveries[:0]
}

// deliverDurable answers the claims that waited for the batch to be
// durable (see ClaimSteps).
func (e *Engine) deliverDurable(b *batch) {
	for _, d := range b.durable {
		d.w.got <- d.result
	}
	b.durable = nil
}

// appendLogs stores the `_server` lines the batch queued, once.
func (e *Engine) appendLogs(b *batch) {
	if e.cfg.Logs == nil || len(b.logs) == 0 {
		return
	}
	defer func() { b.logs = b.logs[:0] }()
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
