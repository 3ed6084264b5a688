package engine_test

import (
	"reflect"
	"testing"

	"github.com/appliance-sh/appliance/engine/enginetest"
)

func TestSecretValuesListsWhatLogsMustNotShow(t *testing.T) {
	f := enginetest.New(t, `
secrets:
  TOKEN: workspace-token
actions:
  use-key:
    type: script
    input:
      key: {type: string, secret: true}
      label: {type: string}
    script: "true"
tasks:
  t:
    input:
      pin: {type: string, secret: true}
      short: {type: string, secret: true}
      name: {type: string}
    flow:
      a:
        action: use-key
        input: {key: step-key-value, label: plain-label}
`)
	job := f.Execute("t", map[string]any{"pin": "pin-1234", "short": "ab", "name": "not-secret"})
	f.WaitStep(job, "a", "ready")
	got, err := f.Engine.SecretValues(t.Context(), job)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"workspace-token", "step-key-value", "pin-1234"} // longest first; "ab" too short
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("secret values %q, want %q", got, want)
	}
}
