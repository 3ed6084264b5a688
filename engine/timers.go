package engine

import (
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// armJobTimer enforces the task timeout: at the deadline the job is cancelled.
func (e *Engine) armJobTimer(js *jobState) {
	if js.job.Deadline == nil || js.job.Terminal() {
		return
	}
	stopTimer(&js.timer)
	id := js.job.ID
	js.timer = e.clock.AfterFunc(js.job.Deadline.Sub(e.clock.Now()), func() {
		e.post(func(b *batch) (any, error) {
			e.jobTimedOut(b, id)
			return nil, nil
		})
	})
}

func (e *Engine) jobTimedOut(b *batch, id string) {
	js, ok := e.st.jobs[id]
	if !ok || js.job.Terminal() || js.job.Deadline == nil {
		return
	}
	e.log.Info("job timed out", "job", id)
	e.stopJob(b, js, JobCancelled, fmt.Sprintf("job timed out after %s; cancelled", secs(js.job.Deadline.Sub(js.job.CreatedAt))))
}

// armStepTimer enforces a step timeout on the server; the worker enforces
// it too, from Claim.Timeout.
func (e *Engine) armStepTimer(js *jobState, ss *stepState) {
	if ss.rec.Deadline == nil || ss.rec.Status != StepRunning {
		return
	}
	stopTimer(&ss.timer)
	jobID, name, deadline := js.job.ID, ss.rec.Name, *ss.rec.Deadline
	ss.timer = e.clock.AfterFunc(deadline.Sub(e.clock.Now()), func() {
		e.post(func(b *batch) (any, error) {
			e.stepTimedOut(b, jobID, name, deadline)
			return nil, nil
		})
	})
}

func (e *Engine) stepTimedOut(b *batch, jobID, name string, deadline time.Time) {
	js, ok := e.st.jobs[jobID]
	if !ok || js.job.Terminal() {
		return
	}
	ss, ok := js.steps[name]
	if !ok || ss.rec.Status != StepRunning || ss.rec.Deadline == nil || !ss.rec.Deadline.Equal(deadline) {
		return
	}
	timeout := time.Duration(ss.flow.Timeout)
	if ss.rec.ActionType == workflow.TypeAgent {
		timeout = agentTimeout(ss.flow)
	}
	msg := "Step timed out after " + secs(timeout)
	e.unhold(ss)
	e.failAttempt(b, js, ss, msg, timedOutRetryFloor)
}

// secs formats a duration the way timeouts are written: "30s", "3600s".
func secs(d time.Duration) string { return fmt.Sprintf("%gs", d.Seconds()) }
