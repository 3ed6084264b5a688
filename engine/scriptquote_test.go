package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// TestScriptValueNoShellCanHoldFailsTheStep: a value that no quoting can
// place (a NUL byte, a here-document's delimiter line) fails its step
// naming the expression, never showing the value; a docker cmd is quoted
// as the shell script it is.
func TestScriptValueNoShellCanHoldFailsTheStep(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  t:
    input:
      name: {type: string}
    flow:
      a:
        type: script
        script: |
          cat <<EOF
          {{ input.name }}
          EOF
  d:
    input:
      name: {type: string}
    flow:
      a: {type: docker, image: alpine, cmd: 'echo "hi {{ input.name }}"'}
  argv:
    input:
      name: {type: string}
    flow:
      a: {type: docker, image: alpine, command: [bash, -c, 'echo "hi {{ input.name }}"', '{{ input.name }}']}
`)
	for _, name := range []string{"top secret\x00", "top secret\nEOF\nid"} {
		id := createJob(t, f, "t", map[string]any{"name": name})
		c, err := f.Engine.Claim(context.Background(), f.Worker, 0)
		if err != nil || c != nil {
			t.Fatalf("claim = %+v, %v; want no work", c, err)
		}
		msg := deref(f.WaitStep(id, "a", engine.StepFailed).ErrorMessage)
		if !strings.HasPrefix(msg, "render script: ") || !strings.Contains(msg, "{{ input.name }} (line 2): its value holds") || strings.Contains(msg, "secret") {
			t.Errorf("%q: error_message %q, want one naming {{ input.name }} and not the value", name, msg)
		}
	}
	f.Execute("d", map[string]any{"name": `"; id; echo "`})
	c := f.ClaimStep("a")
	if want := `echo "hi "'"; id; echo "'""`; c.Spec.Cmd != want {
		t.Errorf("cmd = %q, want %q", c.Spec.Cmd, want)
	}
	// In [bash, -c, script, arg] the script is quoted; the argument is
	// one argv item, data as it is.
	f.Execute("argv", map[string]any{"name": `"; id; echo "`})
	c = f.ClaimStep("a")
	if want := []string{"bash", "-c", `echo "hi "'"; id; echo "'""`, `"; id; echo "`}; !slices.Equal(c.Spec.Command, want) {
		t.Errorf("command = %q, want %q", c.Spec.Command, want)
	}
}
