package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const approvalYAML = `
actions:
  sign-off:
    type: approval
    message: "Deploy {{ input.version }}?"
    input:
      ticket: {type: string, required: true}
tasks:
  release:
    input:
      version: {type: string, default: "1.2"}
    flow:
      ask:
        action: sign-off
        input: {version: "{{ input.version }}"}
      ship:
        depends_on: [ask]
        type: script
        script: echo shipping with {{ ask.output.input.ticket }}
`

func TestApprovedStepCompletesWithTheApproval(t *testing.T) {
	f := enginetest.New(t, approvalYAML)
	job := f.Execute("release", nil)
	ask := f.WaitStep(job, "ask", engine.StepWaiting)
	if ask.Message != "Deploy 1.2?" || ask.WorkerID != nil {
		t.Fatalf("waiting step %+v", ask)
	}
	if j := f.Job(job); j.Status != engine.JobRunning {
		t.Fatalf("job %s while waiting for approval, want running", j.Status)
	}
	if lines := f.Logs.ServerLines(job); len(lines) != 1 || lines[0] != `step "ask" is waiting for approval: Deploy 1.2?` {
		t.Fatalf("_server lines %q", lines)
	}

	err := f.Engine.Approve(t.Context(), job, "ask", engine.Approval{Approved: true, By: "ada@example.com", Input: map[string]any{}})
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `"ticket"`) {
		t.Fatalf("approval without the required input: %v", err)
	}
	if err := f.Engine.Approve(t.Context(), job, "ask", engine.Approval{Approved: true, By: "ada@example.com", Input: map[string]any{"ticket": "OPS-7"}}); err != nil {
		t.Fatal(err)
	}
	out, _ := f.WaitStep(job, "ask", engine.StepCompleted).Output.(map[string]any)
	if out["approved"] != true || out["approved_by"] != "ada@example.com" || out["approved_at"] == nil {
		t.Fatalf("approval output %v", out)
	}
	if c := f.RunStep("ship", enginetest.Ok(nil)); c.Spec.Script != "echo shipping with 'OPS-7'" {
		t.Fatalf("dependent rendered %q", c.Spec.Script)
	}
	f.WaitStatus(job, engine.JobCompleted)

	if err := f.Engine.Approve(t.Context(), job, "ask", engine.Approval{Approved: true}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("approving a finished job's step: %v, want ErrConflict", err)
	}
}

func TestRejectedStepFailsAndSkipsDependents(t *testing.T) {
	f := enginetest.New(t, approvalYAML)
	job := f.Execute("release", nil)
	f.WaitStep(job, "ask", engine.StepWaiting)
	if err := f.Engine.Approve(t.Context(), job, "ship", engine.Approval{Approved: true}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("approving a pending script step: %v, want ErrConflict", err)
	}
	if err := f.Engine.Approve(t.Context(), job, "ask", engine.Approval{By: "bob", RejectionReason: "not today"}); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(job, engine.JobFailed)
	ask := f.Step(job, "ask")
	if ask.Status != engine.StepFailed || ask.ErrorMessage == nil || *ask.ErrorMessage != "Rejected by bob: not today" {
		t.Fatalf("rejected step %+v", ask)
	}
	if s := f.Step(job, "ship"); s.Status != engine.StepSkipped {
		t.Fatalf("dependent of a rejected step: %s", s.Status)
	}
}

func TestWaitingApprovalSurvivesRestartAndCancel(t *testing.T) {
	f := enginetest.New(t, approvalYAML)
	job := f.Execute("release", nil)
	f.WaitStep(job, "ask", engine.StepWaiting)
	f.Restart()
	if s := f.Step(job, "ask"); s.Status != engine.StepWaiting {
		t.Fatalf("after restart: %s, want still waiting", s.Status)
	}
	if err := f.Engine.CancelJob(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	if s := f.WaitStep(job, "ask", engine.StepCancelled); s.Status != engine.StepCancelled {
		t.Fatalf("after cancel: %s", s.Status)
	}
}

func TestApprovalInputWithAnUnknownKeyIsInvalid(t *testing.T) {
	f := enginetest.New(t, approvalYAML)
	job := f.Execute("release", nil)
	f.WaitStep(job, "ask", engine.StepWaiting)
	for _, approved := range []bool{true, false} {
		err := f.Engine.Approve(t.Context(), job, "ask", engine.Approval{Approved: approved, By: "ada", Input: map[string]any{"ticket": "OPS-7", "tikcet": "OPS-8"}})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), `input "tikcet": unknown (declared: ticket)`) {
			t.Fatalf("approved=%v with an unknown key: %v", approved, err)
		}
	}
	if s := f.Step(job, "ask"); s.Status != engine.StepWaiting {
		t.Fatalf("step %s after refused answers, want still waiting", s.Status)
	}
}
