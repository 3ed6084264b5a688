package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

// runAssignment runs one claimed step from start report to the end of its
// process, and returns a channel closed once the server has the step's
// completion report (or refused it), or nil if the step never started. The
// report goes on in the background (one of the slot's reporters)
// meanwhile. After a durable claim, on a server whose claims carry results
// (see resultPairer), the result is held for the slot's next claim
// (hold, ready once the result is queued): the two then share a request
// and a commit. Reporting the start is
// retried until claimCtx ends (the worker stops): a step not started yet
// is left to the server to hand out again. A durable claim (see
// StepsClaimer) started the step: it runs at once, with no start report.
func (w *Worker) runAssignment(claimCtx context.Context, lt lifetimes, rep *reporters, workerID string, a *Assignment, durable bool) (delivered <-chan struct{}, hold *resultHold) {
	ref := StepRef{JobID: a.JobID, Step: a.StepName}
	w.track(ref)
	log := w.log.With("job_id", a.JobID, "step", a.StepName)
	var err error
	if !durable {
		err = w.retry(claimCtx, "report step start", func(ctx context.Context) error {
			return w.srv.Start(ctx, workerID, a.JobID, a.StepName)
		})
	}
	if err != nil {
		// The step is not ours to run any more, or the worker is stopping;
		// the server recovers steps whose worker went quiet. Nothing ran,
		// so nothing is lost: a stop is no error.
		if claimCtx.Err() != nil {
			log.Info("worker stopping: step not started (nothing ran; the server recovers it)", "err", err)
		} else {
			log.Error("step not started", "err", err)
		}
		w.untrack(ref)
		return nil, nil
	}
	log.Info("step started", "runner", a.Runner)

	stepCtx, kill := context.WithCancelCause(lt.steps)
	defer kill(nil)
	if a.TimeoutSecs > 0 {
		d := time.Duration(a.TimeoutSecs * float64(time.Second))
		var cancel context.CancelFunc
		stepCtx, cancel = context.WithTimeoutCause(stepCtx, d, runners.TimeoutError(a.TimeoutSecs))
		defer cancel()
	}

	meta := runMeta{Run: randomID(), JobID: a.JobID, Step: a.StepName, WorkerID: workerID, Created: time.Now().UTC()}
	if p, ok := w.srv.(Prover); ok {
		meta.Secret = p.Secret(workerID)
	}
	j := w.newJournal(meta, log)
	if a.EventSource {
		j = newEventGate(j, maxUnackedEvents)
		// A consumer runs until stopped: waiting for it to finish would
		// hold the drain to its deadline. The server starts it again.
		go func() {
			select {
			case <-lt.shutdown:
				kill(runners.ErrConsumerStopped)
			case <-stepCtx.Done():
			}
		}()
	}
	finished := make(chan struct{})
	d := &delivery{j: j, log: log, finished: finished, kill: kill, ref: ref, delivered: make(chan struct{})}
	if _, ok := w.srv.(resultPairer); ok && durable && !a.EventSource {
		// (An event source's last lines may wait for room among its
		// trigger's jobs: its slot claims without waiting for them.)
		d.hold = newResultHold()
	}
	rep.runs <- d
	stopWatch := w.watchCancel(stepCtx, a.JobID, kill)

	// The step's output waits while the journal is full; its end (a kill,
	// a timeout, the drain deadline) ends the wait.
	res := w.execute(stepCtx, a, func(stream, line string) { j.Log(stepCtx, stream, line) }, j.Flush)
	stopWatch()
	res.WorkerID = workerID
	if _, ok := w.srv.(HandBacker); ok && res.Error != nil && errors.Is(context.Cause(stepCtx), runners.ErrShuttingDown) {
		// Cut by the drain deadline, not failed: a server that takes the
		// step back runs it again (set before the result is in the journal,
		// where the reporter finds it).
		d.handBack.Store(true)
	}
	// The result goes after the last line, so a finished job's log is whole.
	j.Finish(res)
	close(finished)
	return d.delivered, d.hold
}

// newJournal begins a step run's journal: in the spool when the worker has
// one and it takes the run, in memory otherwise.
func (w *Worker) newJournal(meta runMeta, log *slog.Logger) journal {
	if w.cfg.Spool != nil {
		r, err := w.cfg.Spool.create(meta)
		if err == nil {
			return r
		}
		log.Error("spool: cannot keep the step's reports on disk: keeping them in memory", "err", err)
	}
	return newMemJournal(meta, log, w.cfg.LogBuffer)
}

// execute finds the runner and workspace and runs the step, its output
// going to sink and flush (see runners.Step).
func (w *Worker) execute(ctx context.Context, a *Assignment, sink func(stream, line string), flush func()) Result {
	name := a.Runner
	if name == "" {
		name = "local"
	}
	r, ok := w.cfg.Runners[name]
	if !ok {
		return runners.Failed(1, fmt.Sprintf("unknown runner %q (this worker has: %s)", name, strings.Join(w.runnerNames(), ", ")))
	}
	dir, err := w.srv.Workspace(ctx, a.Workspace, a.Revision)
	if err != nil {
		if ctx.Err() != nil {
			return runners.Failed(runners.ExitKilled, context.Cause(ctx).Error())
		}
		if errors.Is(err, ErrWorkspaceLimit) {
			// The operator's to know: the server ships something too big
			// or hostile, and every worker will refuse it alike.
			w.log.Warn("workspace tarball refused", "job_id", a.JobID, "step", a.StepName, "workspace", a.Workspace, "err", err)
		}
		return runners.Failed(1, fmt.Sprintf("fetch workspace %q: %v", a.Workspace, err))
	}
	return runners.Execute(ctx, r, &runners.Step{
		JobID:     a.JobID,
		Name:      a.StepName,
		Workspace: a.Workspace,
		Revision:  a.Revision,
		Dir:       dir,
		Action:    a.ActionSpec,
		Input:     a.Input,
		WorkspaceToken: func(ctx context.Context) (string, error) {
			return w.srv.StepToken(ctx, w.ID(), a.JobID, a.StepName)
		},
		Log:   sink,
		Flush: flush,
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

// watchCancel kills the step if its job is cancelled, until stop is
// called: told by a server that calls back (the in-process one), or by
// long-polling it on a goroutine.
func (w *Worker) watchCancel(ctx context.Context, jobID string, kill context.CancelCauseFunc) (stop func()) {
	if n, ok := w.srv.(CancelNotifier); ok {
		stopNotice, err := n.OnCancelled(ctx, jobID, func() { kill(runners.ErrStepCancelled) })
		if err == nil {
			return func() { stopNotice() }
		}
		w.log.Debug("cancellation notice refused: polling", "job_id", jobID, "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() { defer close(polled); w.pollCancel(ctx, jobID, kill) }()
	return func() { cancel(); <-polled }
}

// pollCancel long-polls the server for the job's cancellation, once the
// step ran CancelPollDelay, and kills the step when it comes, until ctx
// ends.
func (w *Worker) pollCancel(ctx context.Context, jobID string, kill context.CancelCauseFunc) {
	sleep(ctx, w.cfg.CancelPollDelay)
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
			kill(runners.ErrStepCancelled)
			return
		}
		sleep(ctx, w.cfg.IdlePause-time.Since(began))
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
