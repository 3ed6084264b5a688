package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/logtest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// logDB is one database holding job logs: each Open is a new connection
// pool and a new Logs on it, as a restarted server or another replica has.
type logDB struct{ dsn string }

func (d logDB) Open(t *testing.T) store.LogBackend {
	t.Helper()
	l := postgres.OpenLogs(open(t, d.dsn))
	t.Cleanup(func() { l.Close() })
	return l
}

func (d logDB) SetWritten(t *testing.T, jobID string, at time.Time) {
	t.Helper()
	db := open(t, d.dsn)
	if err := postgres.SetLogWritten(context.Background(), db, jobID, at); err != nil {
		t.Fatal(err)
	}
}

func TestLogsPassTheLogSuite(t *testing.T) {
	logtest.Run(t, logtest.Config{
		New:                func(t *testing.T) logtest.Storage { return logDB{pgtest.DSN(t)} },
		KeepsDroppedCounts: true,
	})
}
