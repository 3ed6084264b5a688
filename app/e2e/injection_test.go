package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// injectionWorkspace has one task per script language, each printing its
// input back from every context a value can stand in: in the shell a
// double-quoted and a single-quoted word and a here-document; in python,
// javascript and typescript a string literal of each kind and an
// expression (`x = {{ input.name }}`, `n = {{ input.count }}`), where the
// value must become a literal, never code.
var injectionWorkspace = `tasks:
  shell:
    input:
      name: {type: string}
      count: {type: number}
    flow:
      say:
        script: |
          echo "str: {{ input.name }}"
          echo 'quoted: {{ input.name }}'
          cat <<EOF
          heredoc: {{ input.name }}
          EOF
          echo count: {{ input.count }}
  python:
    input:
      name: {type: string}
      count: {type: number}
    flow:
      say:
        language: python
        script: |
          import sys
          s = "{{ input.name }}"
          q = '{{ input.name }}'
          t = """{{ input.name }}"""
          x = {{ input.name }}
          n = {{ input.count }}
          sys.stdout.write("str: " + s + "\nquoted: " + q + "\ntriple: " + t + "\nexpr: " + x + "\ncount: " + str(n) + "\n")
  javascript:
    input:
      name: {type: string}
      count: {type: number}
    flow:
      say:
        language: javascript
        script: |
          const s = "{{ input.name }}";
          const q = '{{ input.name }}';
          const t = ` + "`{{ input.name }}`" + `;
          const x = {{ input.name }};
          const n = {{ input.count }};
          process.stdout.write("str: " + s + "\nquoted: " + q + "\ntemplate: " + t + "\nexpr: " + x + "\ncount: " + n + "\n");
  typescript:
    input:
      name: {type: string}
      count: {type: number}
    flow:
      say:
        language: typescript
        script: |
          declare const process: any;
          const s: string = "{{ input.name }}";
          const q: string = '{{ input.name }}';
          const t: string = ` + "`{{ input.name }}`" + `;
          const x: string = {{ input.name }};
          const n: number = {{ input.count }};
          process.stdout.write("str: " + s + "\nquoted: " + q + "\ntemplate: " + t + "\nexpr: " + x + "\ncount: " + n + "\n");
`

// TestJobInputIsNeverCode performs issue 24's attack: a user who may run
// one task sends, as the input of `echo "hello {{ input.name }}"` (or its
// python, javascript or typescript twin), a value that closes the quote
// and runs code. The step prints the value back byte for byte and runs
// nothing: no id, no server config, no canary file.
func TestJobInputIsNeverCode(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, injectionWorkspace)
	if err := os.WriteFile(filepath.Join(ws, "server-config.yaml"), []byte("jwt_secret: CANARY-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := startFixture(t, map[string]string{"w": ws}, 1)
	hostile := func(canary string) []string {
		py := `import os; os.system("touch ` + canary + `")`
		js := `require("fs").writeFileSync("` + canary + `", "")`
		return []string{
			`"; id; cat server-config.yaml; echo "`,
			`'; touch ` + canary + `; echo '`,
			"$(touch " + canary + ")`touch " + canary + "`",
			`"; ` + py + `; x = "`,
			`'; ` + py + `; x = '`,
			`"""; ` + py + `; x = """`,
			"\"\n" + py + "\nx = \"",
			`\"; ` + py + `; x = \"`,
			`"; ` + js + `; //`,
			`'+` + js + `+'`,
			"${" + js + "}`; " + js + "; `",
			"\\${" + js + "}\\",
			"“unicode” ‘quotes’ é \u00a0 {{ input.name }} {% raw %}",
		}
	}
	langs := []struct {
		task  string
		needs []string // interpreters, any of
		lines []string // what the step prints, each followed by the value
	}{
		{"shell", []string{"bash", "sh"}, []string{"str: ", "quoted: ", "heredoc: "}},
		{"python", []string{"python3", "uv"}, []string{"str: ", "quoted: ", "triple: ", "expr: "}},
		{"javascript", []string{"node", "bun"}, []string{"str: ", "quoted: ", "template: ", "expr: "}},
		{"typescript", []string{"tsc", "bun", "deno"}, []string{"str: ", "quoted: ", "template: ", "expr: "}},
	}
	for _, l := range langs {
		t.Run(l.task, func(t *testing.T) {
			needAny(t, l.needs)
			canary := filepath.Join(t.TempDir(), "pwned")
			for _, name := range hostile(canary) {
				const count = 42.5
				id := f.execute("w", l.task, map[string]any{"name": name, "count": count})
				j := f.waitTerminal(id)
				logs := f.logs(id, "say")
				if j.Status != "completed" {
					t.Fatalf("%q: job %s\n%s", name, j.Status, logs)
				}
				var want strings.Builder
				for _, prefix := range l.lines {
					want.WriteString(prefix + name + "\n")
				}
				want.WriteString("count: 42.5")
				if got := printed(t, logs); got != want.String() {
					t.Errorf("%q: the step printed\n%q\nwant\n%q", name, got, want.String())
				}
				if strings.Contains(logs, "uid=") || strings.Contains(logs, "CANARY-SECRET") {
					t.Errorf("%q: the value ran as code:\n%s", name, logs)
				}
				if _, err := os.Stat(canary); err == nil {
					t.Fatalf("%q: the value ran as code: %s exists", name, canary)
				}
			}
		})
	}
}

// needAny skips the test, saying why, when none of the interpreters is
// installed; with APPLIANCE_REQUIRE_NODE=1 (CI installs them all) that
// is a failure.
func needAny(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			return
		}
	}
	if os.Getenv("APPLIANCE_REQUIRE_NODE") == "1" {
		t.Fatalf("none of %v is on PATH and APPLIANCE_REQUIRE_NODE=1", names)
	}
	t.Skipf("none of %v is on PATH: install one to run this language's attack", names)
}

// printed is what a step wrote to stdout and stderr, its lines joined.
func printed(t *testing.T, logs string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var line struct{ Stream, Line string }
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line.Stream == "stdout" || line.Stream == "stderr" {
			lines = append(lines, line.Line)
		}
	}
	return strings.Join(lines, "\n")
}
