package engine

import (
	"context"
	"fmt"
)

// heldStep finds a running step and checks that workerID holds it: a
// worker reports only what it holds, so a late or forged report cannot
// change a step that was recovered or handed to another worker.
func (e *Engine) heldStep(ctx context.Context, workerID, jobID, name string) (*jobState, *stepState, error) {
	_, known := e.st.workers[workerID]
	if err := reporterErr(workerID, known); err != nil {
		return nil, nil, err
	}
	js, ss, err := e.liveStep(ctx, jobID, name)
	if err != nil {
		return nil, nil, err
	}
	if ss.rec.Status != StepRunning || len(ss.instances) > 0 {
		return nil, nil, fmt.Errorf("step %q is %s: %w", name, ss.rec.Status, ErrConflict)
	}
	if ss.rec.WorkerID == nil || *ss.rec.WorkerID != workerID {
		return nil, nil, fmt.Errorf("step %q is held by another worker: %w", name, ErrConflict)
	}
	return js, ss, nil
}

func (e *Engine) startStep(ctx context.Context, b *batch, workerID, jobID, name string, inProcess bool) error {
	js, ss, err := e.heldStep(ctx, workerID, jobID, name)
	if err != nil {
		return err
	}
	if ss.rec.Unconfirmed {
		ss.rec.Unconfirmed = false
		if !inProcess {
			// A restarted server puts an unconfirmed step back; it fails
			// the in-process workers' steps whatever their records say
			// (see recover), so theirs needs no commit.
			b.dirtyStep(ss.rec)
		}
	}
	if ss.rec.StartedAt != nil {
		return nil
	}
	now := b.now
	ss.rec.StartedAt = &now
	b.dirtyStep(ss.rec)
	e.markJobStarted(b, js)
	return nil
}

func (e *Engine) completeStep(ctx context.Context, b *batch, workerID, jobID, name string, res StepResult) error {
	js, ss, err := e.heldStep(ctx, workerID, jobID, name)
	if err != nil {
		return err
	}
	e.unhold(ss)
	e.markJobStarted(b, js)
	if res.Output != nil {
		ss.rec.Output = res.Output
	}
	if res.ExitCode == 0 && res.Error == nil {
		e.finishStep(b, ss, StepCompleted, nil)
	} else {
		msg := fmt.Sprintf("Exit code: %d", res.ExitCode)
		if res.Error != nil {
			// A worker's message carries the step's stderr tail: a secret
			// the step printed there must not reach the job detail, the UI
			// or a hook, whichever transport brought it.
			msg = js.mask(*res.Error)
		}
		if e.retried(b, js, ss, msg, 0) {
			return nil
		}
		e.finishStep(b, ss, StepFailed, &msg)
	}
	e.stepDone(b, js, ss)
	return nil
}

// RunInterrupted is how a step run its worker handed back ends, in the
// metrics of ended step runs; it is never a step's status.
const RunInterrupted = "interrupted"

// handBackStep puts a running step its worker stopped before it ended
// back to ready, to run again from the start: an interruption is not a
// failed attempt, so it spends none of the step's retries. The run that
// was cut ends like a retried attempt's (the log store closes its
// accounting, metrics count it), and a _server line says why.
func (e *Engine) handBackStep(ctx context.Context, b *batch, workerID, jobID, name, reason string) error {
	js, ss, err := e.heldStep(ctx, workerID, jobID, name)
	if err != nil {
		return err
	}
	e.unhold(ss)
	ended := *ss.rec
	ended.Status = RunInterrupted
	ended.CompletedAt = &b.now
	b.ended = append(b.ended, &ended)

	ss.rec.Status = StepReady
	ss.rec.WorkerID = nil
	ss.rec.StartedAt = nil
	ss.rec.Deadline = nil
	ss.rec.Output = nil
	ss.noWorkerLogged = false
	b.dirtyStep(ss.rec)
	b.serverLog(jobID, fmt.Sprintf("step %q interrupted: %s; it is ready again and runs from the start", name, js.mask(reason)))
	// It keeps its place among the ready steps (its ready_at is kept).
	e.offer(b, js, ss)
	return nil
}
