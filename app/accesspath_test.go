package app

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/store"
)

// The store's migration asks where an old job's task was: in the revision
// the job ran on, read back from its snapshot after a restart, else in the
// current revision; a task in neither is unknown.
func TestTaskPathComesFromTheJobsRevisionSnapshot(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, data := t.TempDir(), t.TempDir()
	writeWorkspace(t, dir, "tasks:\n  release:\n    folder: vault\n    flow:\n      s: {type: script, script: \"true\"}\n")
	open := func() (*workspace.Registry, *revisions) {
		reg, err := workspace.NewRegistry(map[string]string{"main": dir}, map[string]string{}, log)
		if err != nil {
			t.Fatal(err)
		}
		snaps, err := store.OpenSnapshots(filepath.Join(data, "revisions"), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return reg, openRevisions(snaps, data, 1<<20, reg, workspace.LoadOptions{}, log)
	}
	reg, _ := open()
	ws, _ := reg.Current("main")
	old := ws.Revision
	writeWorkspace(t, dir, "tasks:\n  release:\n    description: out of the vault\n    flow:\n      s: {type: script, script: \"true\"}\n")

	// A restarted server: the registry holds only the moved task.
	_, revs := open()
	for _, c := range []struct {
		revision, task, want string
		ok                   bool
	}{
		{old, "release", "vault/release", true},    // from the old revision's snapshot
		{"0000000000", "release", "release", true}, // no such snapshot: the current revision
		{old, "gone", "", false},
	} {
		if got, ok := revs.taskPath("main", c.revision, c.task); got != c.want || ok != c.ok {
			t.Errorf("taskPath(%s, %s) = %q %v, want %q %v", c.revision, c.task, got, ok, c.want, c.ok)
		}
	}
}

// writeWorkspace writes yaml as dir's .workflows/main.yaml.
func writeWorkspace(t testing.TB, dir, yaml string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}
