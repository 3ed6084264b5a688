package engine

import (
	"context"
	"fmt"
	"github.com/appliance-sh/appliance/audit"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// awaitApproval dispatches an approval step, its input and message
// rendered (prepWork): it waits, holding no worker, until Approve.
func (e *Engine) awaitApproval(b *batch, js *jobState, ss *stepState, input map[string]any, msg string) {
	ss.rec.Input = input
	js.noteInput(ss)
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
	err := e.approve(ctx, jobID, step, a)
	if err != nil {
		action := audit.ApprovalGrant
		if !a.Approved {
			action = audit.ApprovalDeny
		}
		e.auditRefused(ctx, action, "job/"+jobID+"/"+step, err)
	}
	return err
}

func (e *Engine) approve(ctx context.Context, jobID, step string, a Approval) error {
	resolved, err := e.approvalInput(ctx, jobID, step, a)
	if err != nil {
		return err
	}
	_, err = e.do(ctx, func(b *batch) (any, error) {
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
		switch {
		case resolved != nil:
			input = resolved
		case a.Approved:
			// Nothing renders (see approvalInput): safe in the loop.
			if input, err = js.ws.ResolveInput(ss.action.Input, a.Input); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
			}
		}
		if input == nil {
			input = map[string]any{}
		}
		js.secretSet().addStep(js.ws, ss.action, input) // the approver's secret fields
		ss.rec.Output = map[string]any{
			"approved":    a.Approved,
			"approved_by": a.By,
			"approved_at": b.now.UTC().Format(timeFormat),
			"input":       input,
		}
		if a.Approved {
			b.audited(ctx, audit.ApprovalGrant, "job/"+jobID+"/"+step)
			e.finishStep(b, ss, StepCompleted, nil)
			e.stepDone(b, js, ss)
			return nil, nil
		}
		msg := "Rejected by " + a.By
		if a.RejectionReason != "" {
			msg += ": " + a.RejectionReason
		}
		b.serverLog(js.job.ID, fmt.Sprintf("step %q: %s", step, msg))
		b.audited(ctx, audit.ApprovalDeny, "job/"+jobID+"/"+step)
		e.finishStep(b, ss, StepFailed, &msg)
		e.stepDone(b, js, ss)
		return nil, nil
	})
	return err
}

// approvalInput resolves an approval's input here, in the caller's
// goroutine and under the render limits, when the action's input defaults
// are templates; otherwise it returns nil and the loop resolves it.
func (e *Engine) approvalInput(ctx context.Context, jobID, step string, a Approval) (map[string]any, error) {
	if !a.Approved {
		return nil, nil
	}
	type found struct {
		ws   *workflow.Workspace
		defs *workflow.Inputs
	}
	v, err := e.do(ctx, func(*batch) (any, error) {
		js, ss, err := e.liveStep(ctx, jobID, step)
		if err != nil {
			return nil, err
		}
		return found{js.ws, ss.action.Input}, nil
	})
	if err != nil {
		return nil, err
	}
	f := v.(found)
	if !workflow.RendersDefaults(f.defs) {
		return nil, nil
	}
	var input map[string]any
	err = e.pool.run(func(ctx context.Context) error {
		var err error
		input, err = f.ws.ResolveInputContext(ctx, f.defs, a.Input)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if input == nil {
		input = map[string]any{}
	}
	return input, nil
}
