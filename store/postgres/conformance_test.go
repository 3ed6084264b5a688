package postgres_test

import (
	"testing"

	"github.com/appliance-sh/appliance/engine/storetest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// The PostgreSQL store passes the engine's Store conformance suite, the
// one bbolt passes, each case on a new database. Reopen drops the pool
// without a word to the server, as a killed process would, and opens the
// same database again.
func TestStoreConformance(t *testing.T) {
	dsns := map[storetest.Store]string{}
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) storetest.Store {
			dsn := pgtest.DSN(t)
			db := open(t, dsn)
			dsns[db] = dsn
			return db
		},
		Reopen: func(t *testing.T, s storetest.Store) storetest.Store {
			dsn := dsns[s]
			_ = s.(*postgres.DB).Close()
			db := open(t, dsn)
			dsns[db] = dsn
			return db
		},
	})
}
