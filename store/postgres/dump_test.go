package postgres_test

import (
	"testing"

	"github.com/appliance-sh/appliance/store/dump"
	"github.com/appliance-sh/appliance/store/dump/dumptest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// postgresSources is a server's state in a new database.
func postgresSources(t *testing.T) dump.Sources {
	t.Helper()
	db := open(t, pgtest.DSN(t))
	return dump.Sources{Store: db, Logs: postgres.OpenLogs(db), Snapshots: db.Snapshots(1 << 20)}
}

// A populated bbolt server moves to PostgreSQL and back: each dump is the
// same as the one before, record for record.
func TestDumpRoundTripsBboltToPostgreSQLAndBack(t *testing.T) {
	from := dumptest.Bbolt(t)
	dumptest.Populate(t, from)
	pg := postgresSources(t)
	want := dumptest.RoundTrip(t, from, pg)
	back := dumptest.Bbolt(t)
	dumptest.Same(t, want, dumptest.RoundTrip(t, pg, back))
}

// And the other way: a server that began on PostgreSQL.
func TestDumpRoundTripsPostgreSQLToBbolt(t *testing.T) {
	from := postgresSources(t)
	dumptest.Populate(t, from)
	dumptest.RoundTrip(t, from, dumptest.Bbolt(t))
}
