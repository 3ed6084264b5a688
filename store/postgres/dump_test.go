package postgres_test

import (
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/dump"
	"github.com/appliance-sh/appliance/store/dump/dumptest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// bboltSources is a bbolt server's state in a new folder.
func bboltSources(t *testing.T) dump.Sources {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "appliance.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	logs, err := store.OpenLogs(filepath.Join(dir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logs.Close() })
	snaps, err := store.OpenSnapshots(filepath.Join(dir, "snapshots"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return dump.Sources{Store: db, Logs: logs, Snapshots: snaps}
}

// postgresSources is a server's state in a new database.
func postgresSources(t *testing.T) dump.Sources {
	t.Helper()
	db := open(t, pgtest.DSN(t))
	return dump.Sources{Store: db, Logs: postgres.OpenLogs(db), Snapshots: db.Snapshots(1 << 20)}
}

// A populated bbolt server moves to PostgreSQL and back: each dump is the
// same as the one before, record for record.
func TestDumpRoundTripsBboltToPostgreSQLAndBack(t *testing.T) {
	from := bboltSources(t)
	dumptest.Populate(t, from)
	pg := postgresSources(t)
	want := dumptest.RoundTrip(t, from, pg)
	back := bboltSources(t)
	dumptest.Same(t, want, dumptest.RoundTrip(t, pg, back))
}

// And the other way: a server that began on PostgreSQL.
func TestDumpRoundTripsPostgreSQLToBbolt(t *testing.T) {
	from := postgresSources(t)
	dumptest.Populate(t, from)
	dumptest.RoundTrip(t, from, bboltSources(t))
}
