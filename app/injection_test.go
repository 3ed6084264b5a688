package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestJobInputIsNeverShellCode performs issue 24's attack: a user who may
// run one task sends, as the input of `echo "hello {{ input.name }}"`, a
// value that closes the quote and runs commands. The step prints the
// value back and runs nothing: no id, no server config, no canary file.
func TestJobInputIsNeverShellCode(t *testing.T) {
	ws := t.TempDir()
	canary := filepath.Join(t.TempDir(), "pwned")
	writeWorkspace(t, ws, `tasks:
  greet:
    input:
      name: {type: string}
    flow:
      say:
        script: |
          echo "hello {{ input.name }}"
          echo 'quoted: {{ input.name }}'
          cat <<EOF
          heredoc: {{ input.name }}
          EOF
`)
	if err := os.WriteFile(filepath.Join(ws, "server-config.yaml"), []byte("jwt_secret: CANARY-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"w": ws}, 1)
	for _, name := range []string{
		`"; id; cat server-config.yaml; echo "`,
		`'; touch ` + canary + `; echo '`,
		"$(touch " + canary + ")`touch " + canary + "`",
	} {
		id := f.execute("w", "greet", map[string]any{"name": name})
		j := f.waitTerminal(id)
		logs := f.logs(id, "say")
		if j.Status != "completed" {
			t.Fatalf("%q: job %s\n%s", name, j.Status, logs)
		}
		var printed []string
		for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
			var line struct{ Stream, Line string }
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			if line.Stream == "stdout" || line.Stream == "stderr" {
				printed = append(printed, line.Line)
			}
		}
		if want := []string{"hello " + name, "quoted: " + name, "heredoc: " + name}; !slices.Equal(printed, want) {
			t.Errorf("%q: the step printed\n%q\nwant\n%q", name, printed, want)
		}
		if strings.Contains(logs, "uid=") || strings.Contains(logs, "CANARY-SECRET") {
			t.Errorf("%q: the value ran as code:\n%s", name, logs)
		}
		if _, err := os.Stat(canary); err == nil {
			t.Fatalf("%q: the value ran as code: %s exists", name, canary)
		}
	}
}
