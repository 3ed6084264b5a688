package engine

import (
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Step retries (see the workflow's retries, retry_delay, retry_backoff).
// An attempt that failed on its worker's side (a non-zero exit, a runner
// error, the step timeout, a lost worker) is retried while the step's
// policy allows: the step goes back to pending with retry_at set, a timer
// makes it ready again then, and the DAG does not move on meanwhile, so
// dependents and hooks see only the final outcome. Failures the server
// decides (`when`, input and template errors), cancel and the job timeout
// are final. The timer is durable: its due time is in the step record, and
// a restart arms it again (load).

// timedOutRetryFloor is the least wait before retrying an attempt that
// timed out: its worker kills the process at the same deadline, with a
// grace period (5s by default) before SIGKILL, and the next attempt must
// not start on that worker while the old one still runs under the same
// step name.
const timedOutRetryFloor = 15 * time.Second

// retried schedules another attempt of a step whose attempt failed with
// msg, at least floor from now, and reports true, or reports false when
// the failure is final.
func (e *Engine) retried(b *batch, js *jobState, ss *stepState, msg string, floor time.Duration) bool {
	if js.job.Terminal() || len(ss.instances) > 0 || ss.rec.ChildJobID != "" || ss.action == nil {
		return false
	}
	p := workflow.StepRetry(ss.flow, ss.action)
	n := ss.rec.AttemptNumber()
	if n >= p.Attempts() {
		return false
	}
	msg = js.mask(msg)
	// The attempt that ended is a step run that ended: the log store
	// closes its accounting, metrics count it as a failed run.
	ended := *ss.rec
	ended.Status = StepFailed
	ended.CompletedAt = &b.now
	b.ended = append(b.ended, &ended)

	delay := max(p.DelayAfter(n), floor)
	at := b.now.Add(delay)
	stopTimer(&ss.timer)
	ss.rec.Status = StepPending
	ss.rec.Attempt = n
	ss.rec.RetryAt = &at
	ss.rec.ErrorMessage = &msg // the failed attempt's, until the next one starts
	ss.rec.WorkerID = nil
	ss.rec.ReadyAt = nil
	ss.rec.StartedAt = nil
	ss.rec.CompletedAt = nil
	ss.rec.Deadline = nil
	ss.rec.Output = nil
	b.dirtyStep(ss.rec)
	b.serverLog(js.job.ID, fmt.Sprintf("step %q attempt %d of %d failed: %s; retrying in %s", ss.rec.Name, n, p.Attempts(), msg, delay))
	b.afterCommit(func() { e.armRetryTimer(js, ss) })
	return true
}

// failAttempt ends a failed attempt: retried (at least floor from now) if
// the policy allows, else the step fails (with a `_server` line, as fail
// writes).
func (e *Engine) failAttempt(b *batch, js *jobState, ss *stepState, msg string, floor time.Duration) {
	if !e.retried(b, js, ss, msg, floor) {
		e.fail(b, js, ss, msg)
	}
}

// awaitingRetry reports whether a pending step waits for its retry timer,
// not for its dependencies or a render.
func (ss *stepState) awaitingRetry() bool {
	return ss.rec.Status == StepPending && ss.rec.RetryAt != nil
}

// armRetryTimer makes the step ready again at its retry_at (at once if
// that has passed, as after downtime).
func (e *Engine) armRetryTimer(js *jobState, ss *stepState) {
	if !ss.awaitingRetry() {
		return
	}
	stopTimer(&ss.timer)
	jobID, name, at := js.job.ID, ss.rec.Name, *ss.rec.RetryAt
	ss.timer = e.clock.AfterFunc(max(at.Sub(e.clock.Now()), 0), func() {
		e.post(func(b *batch) (any, error) {
			e.retryDue(b, jobID, name, at)
			return nil, nil
		})
	})
}

// retryDue starts the next attempt of a step whose retry timer fired, if
// it still waits for that very timer (a cancel or a reload may have come
// first).
func (e *Engine) retryDue(b *batch, jobID, name string, at time.Time) {
	js, ok := e.st.jobs[jobID]
	if !ok || js.job.Terminal() {
		return
	}
	ss, ok := js.steps[name]
	if !ok || !ss.awaitingRetry() || !ss.rec.RetryAt.Equal(at) {
		return
	}
	ss.timer = nil
	prev := derefOr(ss.rec.ErrorMessage)
	n := ss.rec.AttemptNumber() + 1
	ss.rec.Attempt = n
	ss.rec.RetryAt = nil
	ss.rec.ErrorMessage = nil
	ss.readyOrder = 0 // queue behind the steps already ready
	ss.noWorkerLogged = false
	attempts := workflow.StepRetry(ss.flow, ss.action).Attempts()
	b.serverLog(jobID, fmt.Sprintf("step %q attempt %d of %d after: %s", name, n, attempts, prev))
	e.makeReady(b, js, ss, ss.rec.Input)
}
