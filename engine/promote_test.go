package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// flowYAML wraps a task's flow in a workspace with a few actions.
func flowYAML(flow string) string {
	return `
actions:
  ok:
    type: script
    script: "true"
  greet:
    type: script
    script: echo hello {{ input.name }}
    input:
      name:
        type: string
        default: world
tasks:
  t:
    flow:
` + indent(flow, "      ")
}

func indent(s, pad string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

type run struct {
	step string
	res  engine.StepResult
}

func TestPromotionRules(t *testing.T) {
	cases := []struct {
		name    string
		flow    string
		runs    []run
		want    map[string]string
		wantJob string
	}{
		{
			name: "linear chain runs in order",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [b]}`,
			runs:    []run{{"a", enginetest.Ok(nil)}, {"b", enginetest.Ok(nil)}, {"c", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "completed", "b": "completed", "c": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "fan-in runs after every dependency",
			flow: `
a: {action: ok}
b: {action: ok}
c: {action: ok, depends_on: [a, b]}`,
			runs:    []run{{"a", enginetest.Ok(nil)}, {"b", enginetest.Ok(nil)}, {"c", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "completed", "b": "completed", "c": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "diamond",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [a]}
d: {action: ok, depends_on: [b, c]}`,
			runs:    []run{{"a", enginetest.Ok(nil)}, {"c", enginetest.Ok(nil)}, {"b", enginetest.Ok(nil)}, {"d", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "completed", "b": "completed", "c": "completed", "d": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "failure skips dependents transitively",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [b]}
side: {action: ok}`,
			runs:    []run{{"a", enginetest.Exit(2)}, {"side", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "failed", "b": "skipped", "c": "skipped", "side": "completed"},
			wantJob: engine.JobFailed,
		},
		{
			name: "continue_on_failure runs after a failed dependency",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a], continue_on_failure: true}`,
			runs:    []run{{"a", enginetest.Fail(1, "boom")}, {"b", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "failed", "b": "completed"},
			wantJob: engine.JobFailed,
		},
		{
			name: "a step's own continue_on_failure keeps the job completed",
			flow: `
a: {action: ok, continue_on_failure: true}
b: {action: ok, depends_on: [a], continue_on_failure: true}`,
			runs:    []run{{"a", enginetest.Exit(1)}, {"b", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "failed", "b": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "when true runs the step",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a], when: "{{ a.output.go }}"}`,
			runs:    []run{{"a", enginetest.Ok(map[string]any{"go": true})}, {"b", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "completed", "b": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "when false skips the step and a skipped dependency still satisfies",
			flow: `
a: {action: ok}
b: {action: ok, depends_on: [a], when: "{{ a.output.go }}"}
c: {action: ok, depends_on: [a, b]}`,
			runs:    []run{{"a", enginetest.Ok(map[string]any{"go": false})}, {"c", enginetest.Ok(nil)}},
			want:    map[string]string{"a": "completed", "b": "skipped", "c": "completed"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "when on a root step against the job input",
			flow: `
a: {action: ok, when: "{{ input.deploy | default(false) }}"}`,
			want:    map[string]string{"a": "skipped"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "when error fails the step and skips dependents",
			flow: `
a: {action: ok, when: "{{ nope.output }}"}
b: {action: ok, depends_on: [a]}`,
			want:    map[string]string{"a": "failed", "b": "skipped"},
			wantJob: engine.JobFailed,
		},
		{
			name: "all dependencies skipped skips the step",
			flow: `
a: {action: ok, when: "false"}
b: {action: ok, when: "0"}
c: {action: ok, depends_on: [a, b]}
d: {action: ok, depends_on: [c]}`,
			want:    map[string]string{"a": "skipped", "b": "skipped", "c": "skipped", "d": "skipped"},
			wantJob: engine.JobCompleted,
		},
		{
			name: "agent steps fail until they are supported",
			flow: `
a: {type: agent, provider: llm, prompt: "hi"}
b: {action: ok, depends_on: [a]}`,
			want:    map[string]string{"a": "failed", "b": "skipped"},
			wantJob: engine.JobFailed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(tc.flow))
			job := f.Execute("t", nil)
			for _, r := range tc.runs {
				f.RunStep(r.step, r.res)
			}
			j := f.WaitStatus(job, tc.wantJob)
			if got := f.StepStatuses(job); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("step statuses = %v, want %v", got, tc.want)
			}
			if j.CompletedAt == nil {
				t.Error("terminal job has no completed_at")
			}
			if n := f.Logs.Finished(job); n != 1 {
				t.Errorf("log finished %d times, want 1", n)
			}
		})
	}
}

func TestFailedStepSkipsDependents(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
build: {action: ok}
test: {action: ok, depends_on: [build]}
deploy: {action: ok, depends_on: [test]}`))
	job := f.Execute("t", nil)
	f.RunStep("build", enginetest.Exit(3))

	f.WaitStatus(job, engine.JobFailed)
	steps := f.Steps(job)
	if msg := steps["build"].ErrorMessage; msg == nil || *msg != "Exit code: 3" {
		t.Errorf("build error_message = %v, want %q", msg, "Exit code: 3")
	}
	for _, name := range []string{"test", "deploy"} {
		if s := steps[name]; s.Status != engine.StepSkipped || s.WorkerID != nil {
			t.Errorf("%s = %s (worker %v), want skipped and never claimed", name, s.Status, s.WorkerID)
		}
	}
}

func TestFanInWaitsForEveryDependency(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok}
c: {action: ok, depends_on: [a, b]}`))
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(nil))
	if s := f.Step(job, "c"); s.Status != engine.StepPending {
		t.Fatalf("c is %s after only a finished, want pending", s.Status)
	}
	f.RunStep("b", enginetest.Ok(nil))
	if s := f.Step(job, "c"); s.Status != engine.StepReady {
		t.Fatalf("c is %s after a and b finished, want ready", s.Status)
	}
}

func TestStepInputRendersInJobScopeAndActionFieldsInStepScope(t *testing.T) {
	f := enginetest.New(t, `
actions:
  greet:
    type: script
    script: echo hello {{ input.name }} from {{ build_it.output.host }}
    env:
      WHO: "{{ input.name | upper }}"
    input:
      name:
        type: string
        default: world
      count:
        type: integer
        default: 2
tasks:
  t:
    input:
      who:
        type: string
        required: true
    flow:
      build-it:
        type: script
        script: echo {{ input.who }}
      hello:
        action: greet
        depends_on: [build-it]
        input:
          name: "{{ input.who }}-{{ build_it.output.host }}"
`)
	job := f.Execute("t", map[string]any{"who": "ann"})
	c := f.RunStep("build-it", enginetest.Ok(map[string]any{"host": "h1"}))
	if c.Spec.Script != "echo 'ann'" {
		t.Errorf("inline step script = %q, want %q (the job input)", c.Spec.Script, "echo 'ann'")
	}
	c = f.ClaimStep("hello")
	wantInput := map[string]any{"name": "ann-h1", "count": int64(2)}
	if fmt.Sprint(c.Input) != fmt.Sprint(wantInput) {
		t.Errorf("claim input = %v, want %v", c.Input, wantInput)
	}
	if c.Spec.Script != "echo hello 'ann-h1' from 'h1'" {
		t.Errorf("script = %q", c.Spec.Script)
	}
	if c.Spec.Env["WHO"] != "ANN-H1" {
		t.Errorf("env WHO = %q, want ANN-H1", c.Spec.Env["WHO"])
	}
	if f.WS.Actions["greet"].Script != "echo hello {{ input.name }} from {{ build_it.output.host }}" {
		t.Error("rendering changed the workspace's action")
	}
	if c.ActionName != "greet" || c.Runner != "local" || c.Workspace != enginetest.WorkspaceName {
		t.Errorf("claim = %+v", c)
	}
	_ = job
}

func TestRenderErrorFailsTheStepInsteadOfHandingItOut(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a:
  type: script
  script: echo {{ missing.value }}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	if c, err := f.Engine.Claim(t.Context(), f.Worker, 0); err != nil || c != nil {
		t.Fatalf("claim = %+v, %v; want no work", c, err)
	}
	f.WaitStatus(job, engine.JobFailed)
	a := f.Step(job, "a")
	if a.Status != engine.StepFailed || a.ErrorMessage == nil || !strings.Contains(*a.ErrorMessage, "script") {
		t.Errorf("a = %s %v, want failed naming the script template", a.Status, a.ErrorMessage)
	}
}

func TestInvalidInputIsRejected(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  t:
    input:
      n:
        type: integer
        required: true
    flow:
      a: {type: script, script: "true"}
`)
	_, err := f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "t", Input: map[string]any{}})
	if !errorsIs(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "n") {
		t.Errorf("err = %v, want ErrInvalid naming n", err)
	}
	_, err = f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "nope"})
	if !errorsIs(err, engine.ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown task: err = %v, want ErrNotFound naming it", err)
	}
	_, err = f.Engine.CreateJob(t.Context(), engine.CreateJob{Workspace: "other", Task: "t"})
	if !errorsIs(err, engine.ErrNotFound) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("unknown workspace: err = %v, want ErrNotFound naming it", err)
	}
}

func TestJobOutputHoldsSinkStepOutputs(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}
c: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(map[string]any{"x": 1}))
	f.RunStep("b", enginetest.Ok(map[string]any{"y": "b"}))
	f.RunStep("c", enginetest.Ok(nil))
	j := f.WaitStatus(job, engine.JobCompleted)
	want := map[string]any{"b": map[string]any{"y": "b"}}
	if !reflect.DeepEqual(j.Output, want) {
		t.Errorf("job output = %v, want %v", j.Output, want)
	}
	if j.StartedAt == nil {
		t.Error("job has no started_at")
	}
}

func TestOrchestrationErrorsAreServerLogLines(t *testing.T) {
	cases := []struct{ name, flow, want string }{
		{"when", `a: {action: ok, when: "{{ nope.output }}"}`, `step "a" failed: when: `},
		{"for_each", `a: {action: ok, for_each: "{{ input }}"}`, `step "a" failed: for_each: `},
		{"agent prompt", `a: {type: agent, provider: llm, prompt: "{{ nope.output }}"}`, `step "a" failed: prompt: `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(c.flow))
			job := f.Execute("t", nil)
			f.WaitStatus(job, engine.JobFailed)
			lines := f.Logs.ServerLines(job)
			if len(lines) != 1 || !strings.HasPrefix(lines[0], c.want) {
				t.Fatalf("_server lines %q, want one starting %q", lines, c.want)
			}
		})
	}
}
