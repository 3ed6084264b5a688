package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/engine/storetest"
)

// The bbolt store passes the engine's Store conformance suite, including
// a restart from the file a "crashed" process left behind: the reopen reads
// a copy of the file taken while the first handle is still open (no Close,
// so nothing is flushed that a kill -9 would not have flushed).
func TestStoreConformance(t *testing.T) {
	open := func(t *testing.T, path string) *DB {
		t.Helper()
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) storetest.Store {
			return open(t, filepath.Join(t.TempDir(), "appliance.db"))
		},
		Reopen: func(t *testing.T, s storetest.Store) storetest.Store {
			data, err := os.ReadFile(s.(*DB).bolt.Path())
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "after-crash.db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			return open(t, path)
		},
	})
}
