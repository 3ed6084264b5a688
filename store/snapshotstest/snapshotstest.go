// Package snapshotstest is one conformance suite for every store of
// workspace revision snapshots (store.RevisionSnapshots): the files under
// the data folder and the PostgreSQL table keep, refuse and sweep alike.
package snapshotstest

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/store"
)

// Backend opens snapshot stores for the suite.
type Backend struct {
	// Open returns a new, empty store refusing workspaces whose files add
	// up to more than max bytes; the test's cleanup closes it.
	Open func(t *testing.T, max int64) store.RevisionSnapshots
	// Replica opens the same snapshots through another handle, as another
	// server process (a restart, a second replica) would.
	Replica func(t *testing.T, s store.RevisionSnapshots) store.RevisionSnapshots
}

// Run runs every case of the suite against the backend.
func Run(t *testing.T, b Backend) {
	cases := []struct {
		name string
		run  func(t *testing.T, b Backend)
	}{
		{"HoldsTheRevisionsFilesAndRefusesStaleOnes", holdsRevisionFiles},
		{"SweepKeepsWhatIsWantedAndUnwantedOnesUntilTheGraceEnds", sweep},
		{"RefusesWorkspacesOverTheSizeLimit", sizeLimit},
		{"UnknownAndPathLikeNamesDoNotExist", unknownNames},
		{"AnotherServerServesTheSameSnapshots", replica},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}

// newWorkspace writes files (path: content) into a new folder with one
// task and loads it as workspace "main".
func newWorkspace(t *testing.T, files map[string]string) (*workflow.Workspace, string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), "tasks:\n  t:\n    flow:\n      s: {type: script, script: sh run.sh}\n")
	for p, content := range files {
		writeFile(t, filepath.Join(dir, p), content)
	}
	return load(t, dir), dir
}

func load(t *testing.T, dir string) *workflow.Workspace {
	t.Helper()
	ws, err := workspace.Load("main", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileIn reads one file of a revision's snapshot ("" when it lacks it).
func fileIn(t *testing.T, s store.RevisionSnapshots, ws, rev, name string) string {
	t.Helper()
	f, err := s.Open(ws, rev)
	if err != nil {
		t.Fatalf("open snapshot %s/%s: %v", ws, rev, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}

func holdsRevisionFiles(t *testing.T, b Backend) {
	snaps := b.Open(t, 1<<20)
	ws, dir := newWorkspace(t, map[string]string{"run.sh": "echo one\n"})
	if err := snaps.Save(ws); err != nil {
		t.Fatal(err)
	}
	if !snaps.Has("main", ws.Revision) {
		t.Fatal("a saved snapshot is not there")
	}
	writeFile(t, filepath.Join(dir, "run.sh"), "echo two\n")
	// The saved snapshot keeps the files it was named after, and saving
	// the revision again keeps it so.
	if got := fileIn(t, snaps, "main", ws.Revision, "run.sh"); got != "echo one\n" {
		t.Fatalf("the snapshot has run.sh = %q, want it as it was at the revision", got)
	}
	if err := snaps.Save(ws); err != nil {
		t.Fatalf("saving a saved revision again: %v", err)
	}
	if got := fileIn(t, snaps, "main", ws.Revision, "run.sh"); got != "echo one\n" {
		t.Fatalf("after a second save run.sh = %q", got)
	}

	// A second revision, saved from files that changed since it loaded,
	// is refused rather than stored under a name that lies.
	stale := load(t, dir)
	writeFile(t, filepath.Join(dir, "run.sh"), "echo three\n")
	if err := snaps.Save(stale); !errors.Is(err, store.ErrSnapshotStale) {
		t.Fatalf("save of a revision whose files changed: %v, want ErrSnapshotStale", err)
	}
	if snaps.Has("main", stale.Revision) {
		t.Fatal("a stale snapshot was kept")
	}
	if _, err := snaps.Open("main", stale.Revision); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open of the refused revision: %v, want os.ErrNotExist", err)
	}
}

func sweep(t *testing.T, b Backend) {
	snaps := b.Open(t, 1<<20)
	ws, _ := newWorkspace(t, map[string]string{"run.sh": "echo one\n"})
	other, _ := newWorkspace(t, map[string]string{"run.sh": "echo other\n"})
	for _, w := range []*workflow.Workspace{ws, other} {
		if err := snaps.Save(w); err != nil {
			t.Fatal(err)
		}
	}
	// Sweep keeps what keep wants, and the rest until the grace ends.
	onlyOther := func(_, rev string) bool { return rev == other.Revision }
	now := time.Now()
	if n, err := snaps.Sweep(func(string, string) bool { return false }, time.Hour, now); err != nil || n != 0 {
		t.Fatalf("sweep within grace: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(func(string, string) bool { return true }, time.Hour, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep of wanted snapshots: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(func(string, string) bool { return false }, time.Hour, now.Add(2*time.Hour)); err != nil || n != 0 {
		t.Fatalf("sweep right after keep touched them: %d, %v", n, err)
	}
	if n, err := snaps.Sweep(onlyOther, time.Hour, now.Add(4*time.Hour)); err != nil || n != 1 || snaps.Has("main", ws.Revision) {
		t.Fatalf("sweep of an unwanted snapshot after its grace: %d, %v", n, err)
	}
	if !snaps.Has("main", other.Revision) || fileIn(t, snaps, "main", other.Revision, "run.sh") != "echo other\n" {
		t.Fatal("the sweep removed a wanted snapshot")
	}
	// Saving again makes a snapshot used now: the grace starts over.
	if err := snaps.Save(ws); err != nil {
		t.Fatal(err)
	}
	if n, err := snaps.Sweep(onlyOther, time.Hour, time.Now()); err != nil || n != 0 || !snaps.Has("main", ws.Revision) {
		t.Fatalf("sweep of a snapshot saved again: %d, %v", n, err)
	}
}

func sizeLimit(t *testing.T, b Backend) {
	snaps := b.Open(t, 1024)
	ws, _ := newWorkspace(t, map[string]string{"big.bin": strings.Repeat("x", 2048)})
	if err := snaps.Save(ws); !errors.Is(err, workspace.ErrTooBig) {
		t.Fatalf("save of a workspace over the limit: %v, want workspace.ErrTooBig", err)
	}
	if snaps.Has("main", ws.Revision) {
		t.Fatal("a snapshot over the limit was kept")
	}
	small, _ := newWorkspace(t, map[string]string{"run.sh": "echo small\n"})
	if err := snaps.Save(small); err != nil {
		t.Fatalf("save of a workspace under the limit: %v", err)
	}
}

func unknownNames(t *testing.T, b Backend) {
	snaps := b.Open(t, 1<<20)
	for _, n := range [][2]string{{"main", "0123456789abcdef0123"}, {"main", "../escape"}, {"..", "x"}, {"main", ""}, {"", "x"}, {"main", ".hidden"}, {"ma\x00in", "x"}, {"main", "\xff"}} {
		if snaps.Has(n[0], n[1]) {
			t.Errorf("Has(%q, %q) = true", n[0], n[1])
		}
		if f, err := snaps.Open(n[0], n[1]); !errors.Is(err, os.ErrNotExist) || f != nil {
			t.Errorf("Open(%q, %q) = %v, %v; want os.ErrNotExist", n[0], n[1], f, err)
		}
	}
	if n, err := snaps.Sweep(func(string, string) bool { return false }, 0, time.Now()); err != nil || n != 0 {
		t.Fatalf("sweep of an empty store: %d, %v", n, err)
	}
}

func replica(t *testing.T, b Backend) {
	snaps := b.Open(t, 1<<20)
	ws, _ := newWorkspace(t, map[string]string{"run.sh": "echo one\n"})
	if err := snaps.Save(ws); err != nil {
		t.Fatal(err)
	}
	other := b.Replica(t, snaps)
	if !other.Has("main", ws.Revision) || fileIn(t, other, "main", ws.Revision, "run.sh") != "echo one\n" {
		t.Fatal("another server does not serve the saved revision")
	}
	// Both save a revision at once, as two replicas loading one folder do.
	next, _ := newWorkspace(t, map[string]string{"run.sh": "echo next\n"})
	errs := make(chan error, 2)
	for _, s := range []store.RevisionSnapshots{snaps, other} {
		go func() { errs <- s.Save(next) }()
	}
	if err := errors.Join(<-errs, <-errs); err != nil {
		t.Fatalf("concurrent saves of one revision: %v", err)
	}
	if fileIn(t, snaps, "main", next.Revision, "run.sh") != "echo next\n" {
		t.Fatal("the revision both saved is not served")
	}
}
