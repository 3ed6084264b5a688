package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// FuzzLoad feeds arbitrary bytes to the loader as a workflow file: it must
// return a workspace or Errors, never panic or hang. Seeds: the examples,
// the strings below and testdata/fuzz/FuzzLoad.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/.workflows/*")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"tasks: [",
		"a: &a [*a]",
		"x: &x {<<: *x}",
		"tasks:\n  t:\n    flow:\n      a: {script: x, depends_on: [b]}\n      b: {script: y, depends_on: [a]}\n",
		"actions:\n  a: &b\n    type: script\n    script: '{{ input.x }}'\n  c: {<<: [*b, *b]}\n",
		"triggers:\n  t: {type: scheduler, cron: '0 0 31 2 *', task: t, timezone: ''}\n",
		"connection_types: {c: {p: {type: integer}}}\nconnections: {x: {type: c, p: .inf}}\n",
		"--- \n---\ntasks: ~\n",
		"? [a, b]\n: c\n",
		"tasks: !!map {t: {flow: {s: {script: !!binary aGk=}}}}",
		"tasks:\n  t:\n    flow:\n      s:\n        script: |\n          echo \"{{ input.a }}\" '{{ input.b }}' $(( {{ input.n }} ))\n          cat <<EOF\n          {{ input.c }}\n          EOF\n          {% for x in input.l %}{{ x }}{% endfor %}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The fuzzer has no per-input timeout: a hang must crash the worker
		// so the input is kept as a failure.
		defer time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("workflow %q: no result after 10s", data)) }).Stop()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".workflows", "fuzz.yaml"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		ws, err := Load("fuzz", dir, map[string]string{})
		if err == nil {
			if ws == nil {
				t.Fatal("nil workspace without an error")
			}
			return
		}
		var es workflow.Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("want Errors, got %T: %v", err, err)
		}
		for _, e := range es {
			if e.File == "" || e.Msg == "" {
				t.Fatalf("error without a file or message: %+v", e)
			}
		}
	})
}
