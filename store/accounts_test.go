package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/accounts/accountstest"
)

// The bbolt store passes the accounts conformance suite; a reopen closes
// the file and opens it again, as a restarted server does.
func TestAccountsConformance(t *testing.T) {
	open := func(t *testing.T, path string) *DB {
		t.Helper()
		db, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	accountstest.Run(t, accountstest.Backend{
		Open: func(t *testing.T) accounts.UserStore {
			return open(t, filepath.Join(t.TempDir(), "appliance.db"))
		},
		Reopen: func(t *testing.T, s accounts.UserStore) accounts.UserStore {
			db := s.(*DB)
			path := db.bolt.Path()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return open(t, path)
		},
	})
}

// What follows checks bbolt's own buckets and the records older versions
// left in them; the behaviour every store shares is in accountstest.

func rotate(t *testing.T, db *DB, old, next string, at time.Time) (*accounts.RefreshToken, error) {
	t.Helper()
	return db.RotateRefreshToken(context.Background(), old, &accounts.RefreshToken{Hash: next, ExpiresAt: at.Add(time.Hour)}, at)
}

func TestRotationDeletesExpiredTokensOfTheFamily(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h0", UserID: "u1", Family: "f", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Each rotation half an hour after the last: a token expires an hour
	// after it is issued, so only the last two may remain.
	for i := 1; i <= 5; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Minute)
		old := "h" + string(rune('0'+i-1))
		if _, err := db.RotateRefreshToken(ctx, old, &accounts.RefreshToken{Hash: "h" + string(rune('0'+i)), ExpiresAt: at.Add(time.Hour)}, at); err != nil {
			t.Fatalf("rotate %s: %v", old, err)
		}
	}
	var stored int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		stored = tx.Bucket(bucketRefresh).Stats().KeyN
		return nil
	})
	if err != nil || stored != 2 {
		t.Fatalf("stored tokens = %d (%v), want 2 (the last rotated and the current)", stored, err)
	}
}

// A record written before families existed is in no family index; it
// founds the family named by its hash when it rotates.
func TestLegacyRefreshTokenIsItsOwnFamily(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	legacy, _ := json.Marshal(map[string]any{"hash": "old", "user_id": "u1", "created_at": t0, "expires_at": t0.Add(time.Hour)})
	err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketRefresh).Put([]byte("old"), legacy) })
	if err != nil {
		t.Fatal(err)
	}
	old, err := rotate(t, db, "old", "new", t0)
	if err != nil || old.UserID != "u1" {
		t.Fatalf("rotate legacy token: %+v, %v", old, err)
	}
	if live, _ := db.RefreshFamilyLive(ctx, "old"); !live {
		t.Fatal("the legacy token's successor is not in the family named by its hash")
	}
	if _, err := rotate(t, db, "old", "x", t0); !errors.Is(err, accounts.ErrTokenReused) {
		t.Fatalf("reusing the legacy token: %v, want ErrTokenReused", err)
	}
	if _, err := rotate(t, db, "new", "y", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("successor after reuse: %v, want ErrNotFound", err)
	}
}

// A database from before the per-user index of refresh tokens gets it at
// open, so a password change or deletion revokes those older tokens too,
// including records from before token families.
func TestOpenIndexesOlderRefreshTokensByUser(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	u := &accounts.User{ID: "u", Email: "u@x.io", Groups: []string{}, CreatedAt: t0}
	if err := db.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(time.Hour)
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "fam", UserID: "u", Family: "f1", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	// Make it an old database: no user index, and one token from before
	// families (no family, not in the family index).
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketUserRefresh); err != nil {
			return err
		}
		v, _ := json.Marshal(accounts.RefreshToken{Hash: "legacy", UserID: "u", ExpiresAt: exp})
		return tx.Bucket(bucketRefresh).Put([]byte("legacy"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, fam := range []string{"f1", "legacy"} {
		if live, _ := db.RefreshFamilyLive(ctx, fam); !live {
			t.Fatalf("family %s not live after reopen", fam)
		}
	}
	if _, err := db.SetPassword(ctx, "u", "$argon2id$x", "", false); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []string{"f1", "legacy"} {
		if live, _ := db.RefreshFamilyLive(ctx, fam); live {
			t.Errorf("family %s survived the password change", fam)
		}
	}
	if _, err := db.RotateRefreshToken(ctx, "legacy", &accounts.RefreshToken{Hash: "next", ExpiresAt: exp}, t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("rotating the revoked legacy token: %v", err)
	}
}
