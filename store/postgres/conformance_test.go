package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine/storetest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// The PostgreSQL store passes the engine's Store conformance suite, the
// one bbolt passes, each case on a new database. Reopen drops the pool
// without a word to the server, as a killed process would, and opens the
// same database again; Peer is a second pool on the database, as a second
// server has; Sever terminates every server session on the database
// (pg_terminate_backend), as a restart of PostgreSQL does.
func TestStoreConformance(t *testing.T) {
	dsns := map[storetest.Store]string{}
	reopen := func(t *testing.T, s storetest.Store) storetest.Store {
		db := open(t, dsns[s])
		dsns[db] = dsns[s]
		return db
	}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) storetest.Store {
			dsn := pgtest.DSN(t)
			db := open(t, dsn)
			dsns[db] = dsn
			return db
		},
		Reopen: func(t *testing.T, s storetest.Store) storetest.Store {
			_ = s.(*postgres.DB).Close()
			return reopen(t, s)
		},
		Peer: reopen,
		Sever: func(t *testing.T, s storetest.Store) {
			terminateSessions(t, dsns[s])
		},
	})
}

// terminateSessions ends every other session on the DSN's database.
func terminateSessions(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
}
