package engine_test

import (
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// TestInputMeansTheSameInEveryScope walks the README's template scope
// table: flow-step input maps and hook input maps see the job's input;
// action fields see the step's input; an optional input nobody gave is
// null (empty in text), never undefined.
func TestInputMeansTheSameInEveryScope(t *testing.T) {
	f := enginetest.New(t, `
actions:
  greet:
    type: script
    input:
      who: {type: string}
      shout: {type: boolean, default: false}
    script: "echo {{ input.who }} {{ input.shout }}"
  notify:
    type: script
    input:
      msg: {type: string}
    script: "echo {{ input.msg }}"
tasks:
  t:
    input:
      name: {type: string, required: true}
      nickname: {type: string}
      token: {type: string, secret: true}
    flow:
      named:
        action: greet
        input: {who: "{{ input.name }}/{{ input.nickname }}"}
      inline:
        script: "echo {{ input.name }} {{ input.nickname is none }}"
    on_success:
      - action: notify
        input: {msg: "{{ input.name }} {{ input.token }} {{ hook.status }}"}
`)
	job := f.Execute("t", map[string]any{"name": "Ada", "token": "s3cret-value"})
	if in := f.Job(job).Input; in["nickname"] != nil {
		t.Fatalf("job input %v: nickname want null", in)
	} else if _, present := in["nickname"]; !present {
		t.Fatalf("job input %v: nickname want present as null", in)
	}
	named := f.RunStep("named", enginetest.Ok(nil))
	if named.Spec.Script != "echo 'Ada/' 'false'" {
		t.Errorf("named step script %q, want the step's input with the action default", named.Spec.Script)
	}
	inline := f.RunStep("inline", enginetest.Ok(nil))
	if inline.Spec.Script != "echo 'Ada' 'true'" {
		t.Errorf("inline step script %q, want the job's input", inline.Spec.Script)
	}
	f.WaitStatus(job, engine.JobCompleted)
	hooks := hookJobs(t, f, job)
	if len(hooks) != 1 {
		t.Fatalf("%d hook jobs, want 1", len(hooks))
	}
	if got, want := hooks[0].Input["msg"], "Ada *** completed"; got != want {
		t.Errorf("hook input msg %q, want %q (the job's input, secrets masked)", got, want)
	}
}
