package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/accounts/accountstest"
	"github.com/appliance-sh/appliance/store/postgres"
	"github.com/appliance-sh/appliance/store/postgres/pgtest"
)

// The PostgreSQL store passes the accounts conformance suite, each case on
// a new database; a reopen is another pool on the same database, as a
// restarted server or a second replica would open it.
func TestAccountsConformance(t *testing.T) {
	dsns := map[accounts.UserStore]string{}
	accountstest.Run(t, accountstest.Backend{
		Open: func(t *testing.T) accounts.UserStore {
			dsn := pgtest.DSN(t)
			db := open(t, dsn)
			dsns[db] = dsn
			return db
		},
		Reopen: func(t *testing.T, s accounts.UserStore) accounts.UserStore {
			if err := s.(*postgres.DB).Close(); err != nil {
				t.Fatal(err)
			}
			db := open(t, dsns[s])
			dsns[db] = dsns[s]
			return db
		},
	})
}

// A rotation deletes the family's expired tokens rather than letting a
// long-lived login pile them up (the suite sees them unknown; here the
// table shows them gone).
func TestRotationDeletesExpiredTokensOfTheFamily(t *testing.T) {
	dsn := pgtest.DSN(t)
	db := open(t, dsn)
	ctx := context.Background()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h0", UserID: "u1", Family: "f", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Each rotation half an hour after the last: a token expires an hour
	// after it is issued, so only the last two may remain.
	for i := 1; i <= 5; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Minute)
		old := fmt.Sprintf("h%d", i-1)
		if _, err := db.RotateRefreshToken(ctx, old, &accounts.RefreshToken{Hash: fmt.Sprintf("h%d", i), ExpiresAt: at.Add(time.Hour)}, at); err != nil {
			t.Fatalf("rotate %s: %v", old, err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var hashes []string
	rows, err := conn.Query(ctx, `SELECT hash FROM refresh_tokens ORDER BY hash`)
	if err == nil {
		hashes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || !slices.Equal(hashes, []string{"h4", "h5"}) {
		t.Fatalf("stored tokens = %v (%v), want [h4 h5] (the last rotated and the current)", hashes, err)
	}
}
