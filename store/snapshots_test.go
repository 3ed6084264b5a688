package store_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/snapshotstest"
)

func openSnapshots(t *testing.T, dir string, max int64) *store.Snapshots {
	t.Helper()
	s, err := store.OpenSnapshots(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The snapshots under the data folder pass the snapshot suite; another
// server is another handle on the same folder.
func TestSnapshotsConformance(t *testing.T) {
	snapshotstest.Run(t, snapshotstest.Backend{
		Open: func(t *testing.T, max int64) store.RevisionSnapshots {
			return openSnapshots(t, t.TempDir(), max)
		},
		Replica: func(t *testing.T, s store.RevisionSnapshots) store.RevisionSnapshots {
			fs := s.(*store.Snapshots)
			return openSnapshots(t, fs.Dir(), 1<<20)
		},
	})
}

// A temporary file a crashed Save left behind goes with the first sweep
// an hour after it was written, and not before: a Save may be writing it.
func TestSweepRemovesTheLeftoversOfACrashedSave(t *testing.T) {
	dir := t.TempDir()
	snaps := openSnapshots(t, dir, 1<<20)
	tmp := filepath.Join(dir, "main", ".tmp-123")
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("half a tarball"), 0o644); err != nil {
		t.Fatal(err)
	}
	keepAll := func(string, string) bool { return true }
	if _, err := snaps.Sweep(keepAll, time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("a fresh temporary file was removed: %v", err)
	}
	if _, err := snaps.Sweep(keepAll, time.Hour, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("the leftover of a crashed save is still there: %v", err)
	}
}
