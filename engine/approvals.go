package engine

import (
	"context"
	"fmt"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// awaitApproval dispatches an approval step: its message is rendered in
// the step's scope and it waits, holding no worker, until Approve.
func (e *Engine) awaitApproval(b *batch, js *jobState, ss *stepState) {
	input, err := e.givenInput(js, ss)
	if err != nil {
		e.fail(b, js, ss, "input: "+err.Error())
		return
	}
	ss.rec.Input = input
	msg, err := js.ws.Templates.Render(ss.action.Message, e.stepScope(js, ss))
	if err != nil {
		e.fail(b, js, ss, "message: "+err.Error())
		return
	}
	ss.rec.Message = msg
	e.startOnServer(b, js, ss, StepWaiting)
	b.serverLog(js.job.ID, fmt.Sprintf("step %q is waiting for approval: %s", ss.rec.Name, msg))
}

// Approve answers a waiting approval step: approved, it completes with
// output {approved, approved_by, approved_at, input}; rejected, it fails
// and its dependents are skipped. ErrConflict unless the step is waiting;
// ErrInvalid when the input has a key the action does not declare or, when
// approved, does not fit its definitions.
func (e *Engine) Approve(ctx context.Context, jobID, step string, a Approval) error {
	_, err := e.do(ctx, func(b *batch) (any, error) {
		js, ss, err := e.liveStep(ctx, jobID, step)
		if err != nil {
			return nil, err
		}
		if ss.rec.Status != StepWaiting {
			return nil, fmt.Errorf("step %q is %s, not waiting for approval: %w", step, ss.rec.Status, ErrConflict)
		}
		if err := workflow.CheckInputKeys(ss.action.Input, a.Input); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		input := a.Input
		if a.Approved {
			if input, err = js.ws.ResolveInput(ss.action.Input, a.Input); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		if input == nil {
			input = map[string]any{}
		}
		ss.rec.Output = map[string]any{
			"approved":    a.Approved,
			"approved_by": a.By,
			"approved_at": b.now.UTC().Format(timeFormat),
			"input":       input,
		}
		if a.Approved {
			e.finishStep(b, ss, StepCompleted, nil)
			e.stepDone(b, js, ss)
			return nil, nil
		}
		msg := "Rejected by " + a.By
		if a.RejectionReason != "" {
			msg += ": " + a.RejectionReason
		}
		b.serverLog(js.job.ID, fmt.Sprintf("step %q: %s", step, msg))
		e.finishStep(b, ss, StepFailed, &msg)
		e.stepDone(b, js, ss)
		return nil, nil
	})
	return err
}
