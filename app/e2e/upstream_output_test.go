package e2e

import (
	"strings"
	"testing"
)

const greetingWorkspace = `
actions:
  echo:
    type: script
    input:
      greeting: {type: string}
    script: echo {{ input.greeting }}
tasks:
  greet:
    flow:
      say-hello:
        type: script
        script: |
          echo hello
          echo "OUTPUT: {not json"
      echo-greeting:
        action: echo
        depends_on: [say-hello]
        input:
          greeting: "{{ say_hello.output.greeting }}"
  fields:
    flow:
      say-hello:
        type: script
        script: |
          echo 'OUTPUT: {"a": "s3cr3t-a", "b": "s3cr3t-b"}'
      echo-greeting:
        action: echo
        depends_on: [say-hello]
        input:
          greeting: "{{ say_hello.output.greeting }}"
`

// TestMissingUpstreamOutputIsExplainedEndToEnd runs, through a real
// server and its in-process workers, a step that prints no valid OUTPUT
// line and one whose output lacks the field a later step reads: the later
// step fails saying so, with no value of the output in its words.
func TestMissingUpstreamOutputIsExplainedEndToEnd(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, greetingWorkspace)
	f := startFixture(t, map[string]string{"main": ws}, 1)
	for task, want := range map[string]string{
		"greet":  `input: greeting: step "say-hello" has no output (no line "OUTPUT: {json object}" in its log)`,
		"fields": `input: greeting: step "say-hello"'s output has no field greeting; it has: a, b`,
	} {
		id := f.execute("main", task, nil)
		j := f.waitTerminal(id)
		if s := j.step("say-hello"); s.Status != "completed" {
			t.Fatalf("%s: say-hello %s, want completed", task, s.Status)
		}
		st := j.step("echo-greeting")
		if j.Status != "failed" || st.Status != "failed" || st.ErrorMessage == nil || *st.ErrorMessage != want {
			t.Errorf("%s: job %s, echo-greeting %s %v; want failed with %q", task, j.Status, st.Status, deref(st.ErrorMessage), want)
		}
		if st.ErrorMessage != nil && strings.Contains(*st.ErrorMessage, "s3cr3t") {
			t.Errorf("%s: the error shows an output value: %q", task, *st.ErrorMessage)
		}
	}
}
