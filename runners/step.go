package runners

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// runAssignment runs one claimed step from start report to completion
// report. stepsCtx ends when running steps must be killed (drain deadline).
func (w *Worker) runAssignment(stepsCtx context.Context, workerID string, a *Assignment) {
	ref := StepRef{JobID: a.JobID, Step: a.StepName}
	w.track(ref)
	defer w.untrack(ref) // only once the server has the completion (or refused it)
	log := w.log.With("job_id", a.JobID, "step", a.StepName)
	err := w.retry("report step start", func(ctx context.Context) error {
		return w.srv.Start(ctx, workerID, a.JobID, a.StepName)
	})
	if err != nil {
		// The step is not ours to run any more (or the server is gone); the
		// server recovers steps whose worker went quiet.
		log.Error("step start refused; not running it", "err", err)
		return
	}
	log.Info("step started", "runner", a.Runner)
	began := time.Now()

	stepCtx, kill := context.WithCancelCause(stepsCtx)
	defer kill(nil)
	if a.TimeoutSecs > 0 {
		d := time.Duration(a.TimeoutSecs * float64(time.Second))
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithTimeoutCause(stepCtx, d, timeoutError(a.TimeoutSecs))
		defer cancel()
	}

	buf := newLogBuffer()
	watchCtx, stopWatch := context.WithCancel(stepCtx)
	watchersDone := make(chan struct{}, 2)
	go func() { w.watchCancel(watchCtx, a.JobID, kill); watchersDone <- struct{}{} }()
	go func() { w.pushLogs(watchCtx, a, buf, kill); watchersDone <- struct{}{} }()

	res := w.execute(stepCtx, a, buf)
	stopWatch()
	<-watchersDone
	<-watchersDone

	// The log goes before the completion, so a finished job's log is whole.
	if err := w.retry("push final logs", func(ctx context.Context) error {
		return w.flush(ctx, a, buf, nil)
	}); err != nil {
		log.Error("final log push failed; lines lost", "err", err)
	}

	res.WorkerID = workerID
	err = w.retry("report step completion", func(ctx context.Context) error {
		return w.srv.Complete(ctx, workerID, a.JobID, a.StepName, res)
	})
	attrs := []any{"exit_code", res.ExitCode, "duration", time.Since(began).Round(time.Millisecond)}
	if res.Error != nil {
		attrs = append(attrs, "error", firstLine(*res.Error))
	}
	switch {
	case errors.Is(err, ErrConflict):
		log.Warn("server refused the completion: the step is no longer this worker's", append(attrs, "err", err)...)
	case err != nil:
		log.Error("step completion not reported", append(attrs, "err", err)...)
	default:
		log.Info("step finished", attrs...)
	}
}

// execute finds the runner and workspace and runs the step.
func (w *Worker) execute(ctx context.Context, a *Assignment, buf *logBuffer) Result {
	name := a.Runner
	if name == "" {
		name = "local"
	}
	r, ok := w.cfg.Runners[name]
	if !ok {
		return failed(1, fmt.Sprintf("unknown runner %q (this worker has: %s)", name, strings.Join(w.runnerNames(), ", ")))
	}
	dir, err := w.srv.Workspace(ctx, a.Workspace, a.Revision)
	if err != nil {
		if ctx.Err() != nil {
			return failed(exitKilled, context.Cause(ctx).Error())
		}
		return failed(1, fmt.Sprintf("fetch workspace %q: %v", a.Workspace, err))
	}
	return Execute(ctx, r, &Step{
		JobID:     a.JobID,
		Name:      a.StepName,
		Workspace: a.Workspace,
		Dir:       dir,
		Action:    a.ActionSpec,
		Input:     a.Input,
		Log:       buf.add,
	})
}

func (w *Worker) runnerNames() []string {
	names := make([]string, 0, len(w.cfg.Runners))
	for n := range w.cfg.Runners {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// watchCancel long-polls the server for the job's cancellation and kills
// the step when it comes, until ctx ends.
func (w *Worker) watchCancel(ctx context.Context, jobID string, kill context.CancelCauseFunc) {
	b := newBackoff(w.cfg.RetryMin, w.cfg.RetryMax)
	for ctx.Err() == nil {
		began := time.Now()
		cancelled, err := w.srv.Cancelled(ctx, jobID, w.cfg.CancelWait)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Debug("cancellation poll failed", "job_id", jobID, "err", err)
				b.wait(ctx)
			}
			continue
		}
		b.reset()
		if cancelled {
			kill(ErrStepCancelled)
			return
		}
		sleep(ctx, w.cfg.IdlePause-time.Since(began))
	}
}

// pushLogs pushes the step's buffered lines every LogPushInterval until ctx
// ends; a push answered "cancelled" kills the step.
func (w *Worker) pushLogs(ctx context.Context, a *Assignment, buf *logBuffer, kill context.CancelCauseFunc) {
	t := time.NewTicker(w.cfg.LogPushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.flush(ctx, a, buf, kill); err != nil && ctx.Err() == nil {
			w.log.Debug("log push failed; keeping lines for the next one", "job_id", a.JobID, "err", err)
		}
	}
}

// flush pushes every buffered line; lines of a failed push stay buffered.
func (w *Worker) flush(ctx context.Context, a *Assignment, buf *logBuffer, kill context.CancelCauseFunc) error {
	for !buf.empty() {
		lines := buf.take()
		cancelled, err := w.srv.PushLogs(ctx, w.ID(), a.JobID, a.StepName, lines)
		if err != nil {
			if permanent(err) {
				return fmt.Errorf("push logs: %w", err)
			}
			buf.putBack(lines)
			return fmt.Errorf("push logs: %w", err)
		}
		if cancelled && kill != nil {
			kill(ErrStepCancelled)
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
