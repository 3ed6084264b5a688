package postgres_test

import (
	"testing"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
	"github.com/appliance-sh/appliance/store/snapshotstest"
)

// The database's revision snapshots pass the snapshot suite, each case on
// a new database; another server is another pool on it.
func TestSnapshotsConformance(t *testing.T) {
	type handle struct {
		dsn string
		max int64
	}
	handles := map[store.RevisionSnapshots]handle{}
	snapshotstest.Run(t, snapshotstest.Backend{
		Open: func(t *testing.T, max int64) store.RevisionSnapshots {
			dsn := pgtest.DSN(t)
			s := open(t, dsn).Snapshots(max)
			handles[s] = handle{dsn, max}
			return s
		},
		Replica: func(t *testing.T, s store.RevisionSnapshots) store.RevisionSnapshots {
			h := handles[s]
			return open(t, h.dsn).Snapshots(h.max)
		},
	})
}
