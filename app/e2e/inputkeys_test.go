package e2e

import (
	"strings"
	"testing"
)

func TestExecuteRejectsAnUnknownInputKeyNamingTheDeclaredOnes(t *testing.T) {
	f := startFixture(t, examples, 0)
	var errBody struct {
		Error string `json:"error"`
	}
	body := map[string]any{"input": map[string]any{"version": "1.0", "chanel": "beta"}}
	code := do(t, "POST", f.url+"/api/workspaces/examples/tasks/release/execute", body, &errBody)
	if want := `input "chanel": unknown (declared: version, channel)`; code != 400 || !strings.Contains(errBody.Error, want) {
		t.Fatalf("execute with a typo: %d %q, want 400 saying %s", code, errBody.Error, want)
	}

	code, out, errOut := f.client("run", "hello-world", "--input", "nmae=x")
	if want := `input "nmae": unknown (declared: name)`; code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Fatalf("run --input nmae=x: exit %d, stdout %q, stderr %q; want 1 saying %s", code, out, errOut, want)
	}
}
