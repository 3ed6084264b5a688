package workspace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine/workflow"
)

const oneTask = "tasks:\n  %s:\n    flow:\n      s: {script: echo}\n"

func taskFile(name string) string { return strings.ReplaceAll(oneTask, "%s", name) }

func TestLoadReadsYAMLAndYMLRecursively(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{
		".workflows/a.yaml":             taskFile("a"),
		".workflows/nested/b.yml":       taskFile("b"),
		".workflows/nested/deep/c.yaml": taskFile("c"),
		".workflows/notes.txt":          "tasks: [not, yaml, workflows]",
		"other/.workflows/d.yaml":       "not: loaded",
	})
	ws, errs := loadDir(t, dir)
	if errs != nil {
		t.Fatalf("load:\n%v", errs)
	}
	if got := sortedKeys(ws.Tasks); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("tasks %v, want a b c", got)
	}
	if ws.Name != "test" || ws.Dir != dir {
		t.Errorf("name %q dir %q", ws.Name, ws.Dir)
	}
}

func TestDuplicateNamesAcrossFilesNameBothFiles(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{
		".workflows/a.yaml": taskFile("deploy"),
		".workflows/b.yaml": "actions:\n  x: {type: script, script: echo}\n" + taskFile("deploy"),
		".workflows/c.yaml": "actions:\n  x: {type: script, script: echo}\n",
	})
	_, errs := loadDir(t, dir)
	want := []string{
		`.workflows/b.yaml:4:3: tasks.deploy: duplicate task "deploy": also defined at .workflows/a.yaml:2:3`,
		`.workflows/c.yaml:2:3: actions.x: duplicate action "x": also defined at .workflows/b.yaml:2:3`,
	}
	if got := errStrings(errs); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWorkspaceWithoutWorkflowsIsAnError(t *testing.T) {
	_, errs := loadDir(t, writeWorkspace(t, map[string]string{"README": "hi"}))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no workflow files found") {
		t.Fatalf("want a no-workflows error, got %v", errs)
	}
}

func TestLoadOfMissingDirectoryFails(t *testing.T) {
	if _, err := Load("x", filepath.Join(t.TempDir(), "nope"), nil); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}

func TestErrorsFromSeveralFilesAreAllCollected(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{
		".workflows/a.yaml": "tasks:\n  t:\n    flow:\n      s: {action: nope}\n",
		".workflows/b.yaml": "actions: [oops",
		".workflows/c.yaml": "triggers:\n  x: {type: cron}\n",
	})
	got := errStrings(mustErrs(t, dir))
	want := []string{
		`.workflows/a.yaml:4:19: tasks.t.flow.s.action: unknown action "nope"`,
		`.workflows/b.yaml:1:10: syntax error: sequence end token ']' not found`,
		`.workflows/c.yaml:2:13: triggers.x.type: unknown trigger type "cron"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func mustErrs(t *testing.T, dir string) workflow.Errors {
	t.Helper()
	_, errs := loadDir(t, dir)
	if errs == nil {
		t.Fatal("want errors, got a valid workspace")
	}
	return errs
}

func errStrings(es workflow.Errors) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

func TestRevisionIsStableAndFollowsEveryShippedFile(t *testing.T) {
	files := map[string]string{
		".workflows/main.yaml": taskFile("t"),
		"scripts/run.sh":       "echo one",
	}
	rev := func(dir string) string {
		t.Helper()
		ws, errs := loadDir(t, dir)
		if errs != nil {
			t.Fatalf("load:\n%v", errs)
		}
		return ws.Revision
	}
	dir := writeWorkspace(t, files)
	first := rev(dir)
	if again := rev(dir); again != first {
		t.Fatalf("same content, different revisions: %s then %s", first, again)
	}
	if other := rev(writeWorkspace(t, files)); other != first {
		t.Fatalf("same content in another directory, different revision: %s vs %s", first, other)
	}
	changes := []struct {
		name string
		edit func(dir string) error
	}{
		{"script content", func(d string) error {
			return os.WriteFile(filepath.Join(d, "scripts/run.sh"), []byte("echo two"), 0o644)
		}},
		{"new file", func(d string) error { return os.WriteFile(filepath.Join(d, "data.csv"), nil, 0o644) }},
		{"renamed file", func(d string) error {
			return os.Rename(filepath.Join(d, "scripts/run.sh"), filepath.Join(d, "scripts/go.sh"))
		}},
		{"workflow file", func(d string) error {
			return os.WriteFile(filepath.Join(d, ".workflows/main.yaml"), []byte(taskFile("u")), 0o644)
		}},
	}
	for _, c := range changes {
		d := writeWorkspace(t, files)
		if err := c.edit(d); err != nil {
			t.Fatal(err)
		}
		if r := rev(d); r == first {
			t.Errorf("%s: changed, but the revision stayed %s", c.name, r)
		}
	}
	gitOnly := writeWorkspace(t, files)
	if err := os.MkdirAll(filepath.Join(gitOnly, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitOnly, ".git", "HEAD"), []byte("ref"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := rev(gitOnly); r != first {
		t.Errorf("a .git change should not change the revision: %s vs %s", r, first)
	}
}

func TestShippedFilesSkipVCSAndLinksLeavingTheWorkspace(t *testing.T) {
	outside := writeWorkspace(t, map[string]string{"secret.txt": "no", "dir/x": "no"})
	dir := writeWorkspace(t, map[string]string{
		".workflows/main.yaml": taskFile("t"),
		"scripts/a.sh":         "echo",
		".git/config":          "x",
		".hg/store":            "x",
		"sub/.svn/entries":     "x",
	})
	links := map[string]string{
		"inside-link.sh": filepath.Join(dir, "scripts/a.sh"),
		"scripts-link":   filepath.Join(dir, "scripts"),
		"loop":           dir,
		"escape.txt":     filepath.Join(outside, "secret.txt"),
		"escape-dir":     filepath.Join(outside, "dir"),
		"dangling":       filepath.Join(dir, "missing"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Skipf("symlinks unsupported here: %v", err)
		}
	}
	got, err := ShippedFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".workflows/main.yaml", "inside-link.sh", "scripts-link/a.sh", "scripts/a.sh"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ShippedFiles = %v, want %v", got, want)
	}
}

func TestSourceMustBeAShippedFile(t *testing.T) {
	src := `
		actions:
		  ok: {type: script, source: scripts/run.sh}
		  dotted: {type: script, source: ./scripts/../scripts/run.sh}
		`
	ws, errs := loadMain(t, src, "scripts/run.sh", "echo hi")
	if errs != nil {
		t.Fatalf("load:\n%v", errs)
	}
	if ws.Actions["dotted"].Source != "scripts/run.sh" {
		t.Errorf("source should be cleaned, got %q", ws.Actions["dotted"].Source)
	}
	_, errs = loadMain(t, `
		actions:
		  git: {type: script, source: .git/hooks/pre-commit}
		`, ".git/hooks/pre-commit", "echo")
	if len(errs) != 1 || !strings.Contains(errs[0].Msg, "not found in the workspace") {
		t.Errorf("a source under .git is not shipped, want not found; got %v", errs)
	}
}

func TestWorkspaceHooksFromSeveralFilesAreMergedAndCheckedInPlace(t *testing.T) {
	dir := writeWorkspace(t, map[string]string{
		".workflows/a.yaml": "actions:\n  notify: {type: script, script: echo}\non_error:\n  - action: notify\n",
		".workflows/b.yaml": "on_error:\n  - action: notify\n  - action: notfy\n",
	})
	got := errStrings(mustErrs(t, dir))
	want := []string{`.workflows/b.yaml:3:13: on_error[1].action: unknown action "notfy" (did you mean "notify"?)`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	dir = writeWorkspace(t, map[string]string{
		".workflows/a.yaml": "actions:\n  notify: {type: script, script: echo}\non_error:\n  - action: notify\n",
		".workflows/b.yaml": "on_error:\n  - action: notify\n",
	})
	ws, errs := loadDir(t, dir)
	if errs != nil {
		t.Fatal(errs)
	}
	if len(ws.OnError) != 2 {
		t.Errorf("want the hooks of both files, got %d", len(ws.OnError))
	}
}
