package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app"
)

// copyExamples copies the example workspace into a temp dir.
func copyExamples(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	src := filepath.Join("..", "..", "examples")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// breakFile replaces old with bad in a workflow file and returns where bad's
// marker (a substring of bad) now sits, as line:col.
func breakFile(t *testing.T, dir, file, old, bad, marker string) string {
	t.Helper()
	p := filepath.Join(dir, ".workflows", file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte(old))
	if at < 0 {
		t.Fatalf("%s no longer contains %q: update this test", file, old)
	}
	b = bytes.Replace(b, []byte(old), []byte(bad), 1)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	off := at + strings.Index(bad, marker)
	line := bytes.Count(b[:off], []byte("\n")) + 1
	col := off - (bytes.LastIndexByte(b[:off], '\n') + 1) + 1
	return fmt.Sprintf("%d:%d", line, col)
}

func runMain(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := app.Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateExamplesPasses(t *testing.T) {
	code, out, errOut := runMain("validate", "../../examples")
	if code != 0 {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.HasSuffix(out, ": ok\n") || !strings.Contains(out, " tasks, ") {
		t.Errorf("summary = %q", out)
	}
}

func TestValidateReportsEveryErrorWithFileLineAndColumn(t *testing.T) {
	dir := copyExamples(t)
	dep := breakFile(t, dir, "hello.yaml", "depends_on: [say-hello]", "depends_on: [say-helo]", "say-helo")
	cron := breakFile(t, dir, "triggers.yml", `cron: "0 3 * * *"`, `cron: "0 25 * * *"`, `"`)
	typ := breakFile(t, dir, "pipeline.yaml", "type: http_endpoint\n    url:", "type: http_endpont\n    url:", "http_endpont")

	code, out, _ := runMain("validate", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s", code, out)
	}
	want := []string{
		".workflows/hello.yaml:" + dep + `: tasks.hello-world.flow.echo-greeting.depends_on: unknown step "say-helo" (did you mean "say-hello"?)`,
		".workflows/pipeline.yaml:" + typ + `: connections.staging.type: unknown connection type "http_endpont" (did you mean "http_endpoint"?)`,
		".workflows/triggers.yml:" + cron + `: triggers.nightly-pipeline.cron: invalid cron expression "0 25 * * *": hour 25 is out of range 0-23`,
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidateUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"validate"}, {"validate", "a", "b"}, {"validate", "--help"}} {
		if code, _, errOut := runMain(args...); code != 2 || !strings.Contains(errOut, "usage") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a usage line", args, code, errOut)
		}
	}
}

func TestValidateMissingDirectoryFails(t *testing.T) {
	code, _, errOut := runMain("validate", filepath.Join(t.TempDir(), "missing"))
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestSchemaCommandPrintsJSONSchema(t *testing.T) {
	code, out, _ := runMain("schema")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if s["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", s["$schema"])
	}
	if code, _, _ := runMain("schema", "extra"); code != 2 {
		t.Errorf("schema with an argument: exit %d, want 2", code)
	}
}

func TestValidateReportsBadTemplateReferencesAndRetries(t *testing.T) {
	dir := copyExamples(t)
	// echo-greeting no longer depends on say-hello, whose output it reads.
	breakFile(t, dir, "hello.yaml", "depends_on: [say-hello]", "description: runs alone", "runs")
	ref := breakFile(t, dir, "hello.yaml", `greeting: "{{ say_hello.output.greeting }}"`, `greeting: "{{ say_hello.output.greeting }}"`, "say_hello")
	sleep := breakFile(t, dir, "hello.yaml", `script: sleep -- "$INPUT_SECONDS"`, "script: sleep {{ input.secnds }}\n        retries: 11", "input.secnds")
	retries := breakFile(t, dir, "hello.yaml", "retries: 11", "retries: 11", "11")

	code, out, _ := runMain("validate", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s", code, out)
	}
	want := []string{
		".workflows/hello.yaml:" + ref + `: tasks.hello-world.flow.echo-greeting.input.greeting: say_hello.output.greeting: step "say-hello" is not upstream of "echo-greeting", so its output is never in scope: add it to depends_on`,
		".workflows/hello.yaml:" + sleep + `: tasks.sleep.flow.sleep.script: input "secnds" is not declared by task "sleep" (declared: seconds)`,
		".workflows/hello.yaml:" + retries + `: tasks.sleep.flow.sleep.retries: retries must be between 0 and 10, got 11`,
	}
	if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestValidateWarnsOfRawValuesFromData: a `{{ x | raw }}` whose value an
// API caller, an event or an upstream step chooses goes into the script as
// code; validate says so, and still passes.
func TestValidateWarnsOfRawValuesFromData(t *testing.T) {
	dir := copyExamples(t)
	at := breakFile(t, dir, "hello.yaml", `sleep -- "$INPUT_SECONDS"`, `sleep -- {{ input.seconds | raw }}`, "{{")
	code, out, errOut := runMain("validate", dir)
	if code != 0 {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	want := "warning: .workflows/hello.yaml:" + at + ": tasks.sleep.flow.sleep.script: {{ input.seconds | raw }} puts a job input (an API caller's, an event's or a hook's data) into the script as code: drop raw to have it quoted as data\n"
	if !strings.HasPrefix(out, want) || !strings.HasSuffix(out, ": ok\n") {
		t.Errorf("stdout:\n%s\nwant it to start with\n%s", out, want)
	}
}
