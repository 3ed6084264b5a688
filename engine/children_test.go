package engine_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const childYAML = `
actions:
  run-child:
    type: task
    task: child
  run-self:
    type: task
    task: recurse
tasks:
  parent:
    flow:
      call:
        action: run-child
        input:
          who: "{{ input.who | default('ada') }}"
      after:
        depends_on: [call]
        type: script
        script: echo {{ call.output.greet.said }}
  child:
    input:
      who: {type: string, required: true}
    flow:
      greet:
        type: script
        script: echo hi {{ input.who }}
  recurse:
    flow:
      again: {action: run-self}
`

func TestTaskStepRunsAChildJobAndTakesItsOutput(t *testing.T) {
	f := enginetest.New(t, childYAML)
	parent := f.Execute("parent", nil)
	call := f.WaitStep(parent, "call", engine.StepRunning)
	child := f.Job(call.ChildJobID)
	if child.TaskName != "child" || child.SourceType != engine.SourceTask || child.SourceID == nil || *child.SourceID != parent {
		t.Fatalf("child job %+v, want task child from source task %s", child, parent)
	}
	if child.Input["who"] != "ada" || child.Revision != f.Job(parent).Revision {
		t.Fatalf("child input %v revision %s", child.Input, child.Revision)
	}

	f.RunJobStep(call.ChildJobID, "greet", enginetest.Ok(map[string]any{"said": "hi ada"}))
	f.WaitStatus(call.ChildJobID, engine.JobCompleted)
	done := f.WaitStep(parent, "call", engine.StepCompleted)
	if want := map[string]any{"greet": map[string]any{"said": "hi ada"}}; !reflect.DeepEqual(done.Output, want) {
		t.Fatalf("task step output %v, want the child's output %v", done.Output, want)
	}
	c := f.RunJobStep(parent, "after", enginetest.Ok(nil))
	if c.Spec.Script != "echo 'hi ada'" {
		t.Fatalf("dependent rendered %q from the child's output", c.Spec.Script)
	}
	f.WaitStatus(parent, engine.JobCompleted)
}

func TestFailedChildJobFailsItsTaskStep(t *testing.T) {
	f := enginetest.New(t, childYAML)
	parent := f.Execute("parent", nil)
	child := f.WaitStep(parent, "call", engine.StepRunning).ChildJobID
	f.RunJobStep(child, "greet", enginetest.Exit(2))
	f.WaitStatus(parent, engine.JobFailed)
	call := f.Step(parent, "call")
	if call.Status != engine.StepFailed || call.ErrorMessage == nil || !strings.Contains(*call.ErrorMessage, child+" failed") {
		t.Fatalf("task step %+v, want failed naming the child", call)
	}
	if s := f.Step(parent, "after"); s.Status != engine.StepSkipped {
		t.Fatalf("dependent of a failed task step: %s", s.Status)
	}
}

func TestCancellingAJobCancelsItsChildren(t *testing.T) {
	f := enginetest.New(t, childYAML)
	parent := f.Execute("parent", nil)
	child := f.WaitStep(parent, "call", engine.StepRunning).ChildJobID
	f.ClaimJobStep(child, "greet")
	if err := f.Engine.CancelJob(t.Context(), parent); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(child, engine.JobCancelled)
	if s := f.Step(child, "greet"); s.Status != engine.StepCancelled {
		t.Fatalf("child's running step: %s, want cancelled", s.Status)
	}
	if s := f.Step(parent, "call"); s.Status != engine.StepCancelled {
		t.Fatalf("task step: %s, want cancelled", s.Status)
	}
	if cancelled, _ := f.Engine.WaitCancelled(t.Context(), child, 0); !cancelled {
		t.Fatal("the child's workers are not told to stop")
	}
}

func TestChildJobsNestAtMostTenLevels(t *testing.T) {
	f := enginetest.New(t, childYAML)
	top := f.Execute("recurse", nil)
	id, depth := top, 0
	for {
		s := f.Step(id, "again")
		if s.ChildJobID == "" {
			if s.Status != engine.StepFailed || !strings.Contains(*s.ErrorMessage, "nest at most 10 levels") {
				t.Fatalf("deepest step: %s %v", s.Status, s.ErrorMessage)
			}
			break
		}
		id, depth = s.ChildJobID, depth+1
	}
	if depth != 10 {
		t.Fatalf("%d levels of child jobs, want 10", depth)
	}
	f.WaitStatus(top, engine.JobFailed) // the failure climbs back up
}

func TestTaskStepSurvivesARestart(t *testing.T) {
	f := enginetest.New(t, childYAML)
	parent := f.Execute("parent", nil)
	child := f.WaitStep(parent, "call", engine.StepRunning).ChildJobID
	f.Restart()
	if s := f.Step(parent, "call"); s.Status != engine.StepRunning {
		t.Fatalf("task step after restart: %s, want still running", s.Status)
	}
	f.RunJobStep(child, "greet", enginetest.Ok(nil))
	f.WaitStep(parent, "call", engine.StepCompleted)
}
