package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// loopBomb runs for hours: three nested loops of 100,000.
const loopBomb = "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}"

const bombYAML = `
actions:
  ok:
    type: script
    script: "true"
  ask:
    type: approval
    message: "` + loopBomb + `"
tasks:
  when_bomb:
    flow:
      a: {action: ok, when: "` + loopBomb + `true"}
  input_bomb:
    flow:
      a: {action: ok, input: {x: "{{ 'a' * 100000000 }}"}}
  foreach_bomb:
    flow:
      a: {action: ok, for_each: "` + loopBomb + `[1]"}
  script_bomb:
    flow:
      a:
        type: script
        script: "echo ` + loopBomb + `"
  approval_bomb:
    flow:
      a: {action: ask}
  light:
    flow:
      a: {action: ok, input: {x: "{{ input.n }}"}}
`

const (
	testTemplateTime   = 500 * time.Millisecond
	testTemplateOutput = 64 << 10
	// limitMargin is how late past the time limit a bomb may be reported
	// on a loaded machine; hours is what it takes without the limit.
	limitMargin = 5 * time.Second
)

func bombFixture(t *testing.T) *enginetest.Fixture {
	return enginetest.NewWith(t, enginetest.LoadWorkspace(t, bombYAML), enginetest.Options{
		TemplateTime:   testTemplateTime,
		TemplateOutput: testTemplateOutput,
	})
}

// createJob creates a job without waiting for its renders (Execute does).
func createJob(t *testing.T, f *enginetest.Fixture, task string, input map[string]any) string {
	t.Helper()
	j, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: task, Input: input})
	if err != nil {
		t.Fatalf("create %s: %v", task, err)
	}
	return j.ID
}

func TestRenderBombsFailTheirStepNamingTheLimit(t *testing.T) {
	cases := []struct {
		task, want string
	}{
		{"when_bomb", "when: template"},
		{"input_bomb", "input: "},
		{"foreach_bomb", "for_each: template"},
		{"script_bomb", "render script: template"},
		{"approval_bomb", "message: template"},
	}
	timeLimit := "template exceeded limits.template_time (500ms)"
	outputLimit := "template exceeded limits.template_output (64KB)"
	for _, tc := range cases {
		t.Run(tc.task, func(t *testing.T) {
			f := bombFixture(t)
			start := time.Now()
			id := createJob(t, f, tc.task, nil)
			if tc.task == "script_bomb" {
				// The spec renders in the claiming caller, which gets no
				// step: the one it claimed failed.
				c, err := f.Engine.Claim(context.Background(), f.Worker, 0)
				if err != nil || c != nil {
					t.Fatalf("claim = %+v, %v; want no work", c, err)
				}
			}
			s := f.WaitStep(id, "a", engine.StepFailed)
			elapsed := time.Since(start)
			want := timeLimit
			if tc.task == "input_bomb" {
				want = outputLimit
			}
			// The render names its field (tc.want) unless a loaded machine
			// kept it past its deadline's grace: then the pool says it.
			msg := deref(s.ErrorMessage)
			if !strings.HasSuffix(msg, want) || msg != want && !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error_message %q, want %q ... %q", msg, tc.want, want)
			}
			if elapsed > testTemplateTime+limitMargin {
				t.Errorf("failed after %v; limit %v", elapsed, testTemplateTime)
			}
			f.WaitStatus(id, engine.JobFailed)
			if lines := f.Logs.ServerLines(id); len(lines) == 0 || !strings.Contains(lines[len(lines)-1], want) {
				t.Errorf("_server lines %q, want one naming the limit", lines)
			}
		})
	}
}

// A bomb rendering must not hold up anyone else: a light job created
// while it renders runs to the end well within the bomb's time limit.
func TestLightJobsRunWhileABombRenders(t *testing.T) {
	f := bombFixture(t)
	ctx := context.Background()
	bomb := createJob(t, f, "when_bomb", nil)
	start := time.Now()
	light := createJob(t, f, "light", map[string]any{"n": 1})
	var c *engine.Claim
	for c == nil {
		var err error
		if c, err = f.Engine.Claim(ctx, f.Worker, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if c.JobID != light || fmt.Sprint(c.Input["x"]) != "1" {
		t.Fatalf("claimed %+v, want the light job's step with x=1", c)
	}
	if err := f.Engine.StartStep(ctx, f.Worker, light, "a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CompleteStep(ctx, f.Worker, light, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	j, _, err := f.Engine.Job(ctx, light)
	if err != nil || j.Status != engine.JobCompleted {
		t.Fatalf("light job = %+v, %v", j, err)
	}
	if took >= testTemplateTime {
		t.Fatalf("the light job took %v, as long as the bomb's render (%v): the loop waited on it", took, testTemplateTime)
	}
	t.Logf("light job created to completed in %v while a bomb rendered", took)
	f.WaitStep(bomb, "a", engine.StepFailed)
}

// A cancel while the step's templates render wins: the render's late
// result is dropped.
func TestCancelWhileRenderingDropsTheResult(t *testing.T) {
	f := bombFixture(t)
	id := createJob(t, f, "when_bomb", nil)
	if err := f.Engine.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	f.Settle() // the bomb's result came back and was applied (or not)
	if s := f.Step(id, "a"); s.Status != engine.StepCancelled || s.ErrorMessage != nil {
		t.Fatalf("step %s (%s), want cancelled with no error", s.Status, deref(s.ErrorMessage))
	}
	if j := f.Job(id); j.Status != engine.JobCancelled {
		t.Fatalf("job %s, want cancelled", j.Status)
	}
}

// A render in flight at a crash is not lost: the step is still pending in
// the store, and the restarted engine renders it again.
func TestRenderInFlightAtRestartRendersAgain(t *testing.T) {
	f := bombFixture(t)
	id := createJob(t, f, "when_bomb", nil)
	f.Restart() // the first render's result has nowhere to go
	s := f.WaitStep(id, "a", engine.StepFailed)
	if !strings.Contains(deref(s.ErrorMessage), "limits.template_time") {
		t.Fatalf("error_message %q", deref(s.ErrorMessage))
	}
}

func TestJobCreationFailsOnARenderBombInAnInputDefault(t *testing.T) {
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, `
tasks:
  t:
    input:
      x: {type: string, default: "{{ 'a' * 100000000 }}"}
    flow:
      a: {type: script, script: "true"}
`), enginetest.Options{TemplateTime: testTemplateTime, TemplateOutput: testTemplateOutput})
	_, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t"})
	if !errorsIs(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "template exceeded limits.template_output (64KB)") {
		t.Fatalf("err = %v, want ErrInvalid naming limits.template_output", err)
	}
}
