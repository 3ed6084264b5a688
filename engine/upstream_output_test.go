package engine_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// A template reading an upstream step's output field fails with what
// happened and where: the step had no output, or its output lacks the
// field (naming the fields it has, never their values).
func TestMissingUpstreamOutputIsExplained(t *testing.T) {
	for _, c := range []struct {
		name   string
		output map[string]any
		expr   string
		want   string
	}{
		{"no output", nil, "{{ say_hello.output.greeting }}",
			`input: greeting: step "say-hello" has no output (no line "OUTPUT: {json object}" in its log)`},
		{"no output, item syntax", nil, "hi {{ say_hello.output['greeting'] }}",
			`input: greeting: step "say-hello" has no output (no line "OUTPUT: {json object}" in its log)`},
		{"missing field", map[string]any{"b": "secret-value-b", "a": "secret-value-a"}, "{{ say_hello.output.greeting }}",
			`input: greeting: step "say-hello"'s output has no field greeting; it has: a, b`},
		{"missing field, item syntax", map[string]any{"a": 1}, `{{ say_hello.output["greeting"] | upper }}`,
			`input: greeting: step "say-hello"'s output has no field greeting; it has: a`},
		{"empty output", map[string]any{}, "{{ say_hello.output.greeting }}",
			`input: greeting: step "say-hello"'s output has no field greeting; it has no fields`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(`
say-hello: {action: ok}
echo-greeting:
  action: greet
  depends_on: [say-hello]
  input:
    greeting: `+strconv.Quote(c.expr)))
			job := f.Execute("t", nil)
			f.RunStep("say-hello", enginetest.Ok(c.output))
			f.WaitStatus(job, engine.JobFailed)
			s := f.Step(job, "echo-greeting")
			if s.Status != engine.StepFailed || s.ErrorMessage == nil {
				t.Fatalf("echo-greeting = %s %v, want failed", s.Status, s.ErrorMessage)
			}
			if *s.ErrorMessage != c.want {
				t.Errorf("error = %q\nwant    %q", *s.ErrorMessage, c.want)
			}
			if strings.Contains(*s.ErrorMessage, "secret-value") {
				t.Errorf("error %q shows an output's value", *s.ErrorMessage)
			}
		})
	}
}

// The same words where an action's own fields render (the script) and in
// `when`; an error that is not about a missing output stays as it was.
func TestMissingUpstreamOutputIsExplainedInEveryField(t *testing.T) {
	for _, c := range []struct {
		name, step, want string
		output           map[string]any
	}{
		{"script", `
  type: script
  script: echo {{ say_hello.output.greeting }}`, `script: `, nil},
		{"when", `
  action: ok
  when: "{{ say_hello.output.greeting == 'hi' }}"`, `when: `, nil},
		{"nested field", `
  action: greet
  input: {name: "{{ say_hello.output.greeting.text }}"}`, `input: name: template "{{ say_hello.output.greeting.text }}": undefined variable`, map[string]any{"greeting": "hello there"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := enginetest.New(t, flowYAML(`
say-hello: {action: ok}
echo-greeting:
  depends_on: [say-hello]`+c.step))
			job := f.Execute("t", nil)
			f.RunStep("say-hello", enginetest.Ok(c.output))
			if c.name == "script" { // the script renders when a worker claims it
				if cl, err := f.Engine.Claim(t.Context(), f.Worker, 0); err != nil || cl != nil {
					t.Fatalf("claim = %+v, %v; want no work", cl, err)
				}
			}
			f.WaitStatus(job, engine.JobFailed)
			s := f.Step(job, "echo-greeting")
			if s.ErrorMessage == nil {
				t.Fatalf("echo-greeting = %s, want failed with an error", s.Status)
			}
			msg := *s.ErrorMessage
			if c.output == nil {
				if !strings.Contains(msg, c.want) || !strings.HasSuffix(msg, `step "say-hello" has no output (no line "OUTPUT: {json object}" in its log)`) {
					t.Errorf("error = %q, want it to name %q and say say-hello has no output", msg, c.want)
				}
			} else if !strings.HasPrefix(msg, c.want) || strings.Contains(msg, "hello there") {
				t.Errorf("error = %q, want it to start %q and show no value", msg, c.want)
			}
		})
	}
}
