package store

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

func loadTestWorkspace(t *testing.T, dir string) *workflow.Workspace {
	t.Helper()
	ws, err := workspace.Load("main", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotHoldsTheRevisionsFilesAndRefusesStaleOnes(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, ".workflows", "main.yaml"), "tasks:\n  t:\n    flow:\n      s: {type: script, script: sh run.sh}\n")
	writeTestFile(t, filepath.Join(dir, "run.sh"), "echo one\n")
	ws := loadTestWorkspace(t, dir)
	snaps, err := OpenSnapshots(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := snaps.Save(ws); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "run.sh"), "echo two\n")
	// The saved snapshot keeps the files it was named after.
	f, err := snaps.Open("main", ws.Revision)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "run.sh" {
			b, _ := io.ReadAll(tr)
			found = string(b) == "echo one\n"
		}
	}
	if !found {
		t.Fatal("the snapshot lacks run.sh as it was at the revision")
	}

	// A second revision, saved from files that changed since it loaded,
	// is refused rather than stored under a name that lies.
	stale := loadTestWorkspace(t, dir)
	writeTestFile(t, filepath.Join(dir, "run.sh"), "echo three\n")
	if err := snaps.Save(stale); !errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("save of a revision whose files changed: %v, want ErrSnapshotStale", err)
	}
	if snaps.Has("main", stale.Revision) {
		t.Fatal("a stale snapshot was kept")
	}
	if _, err := snaps.Open("main", "../escape"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of a path-like revision: %v", err)
	}

	// Sweep keeps what keep wants, and the rest until the grace ends.
	now := time.Now()
	if n, err := snaps.Sweep(func(string, string) bool { return false }, time.Hour, now); err != nil || n != 0 {
		t.Fatalf("sweep within grace: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(func(string, string) bool { return true }, time.Hour, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep of a wanted snapshot: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(func(string, string) bool { return false }, time.Hour, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep right after keep touched it: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(func(string, string) bool { return false }, time.Hour, now.Add(4*time.Hour)); err != nil || n != 1 || snaps.Has("main", ws.Revision) {
		t.Fatalf("sweep of an unwanted snapshot after its grace: %d, %v", n, err)
	}
}
