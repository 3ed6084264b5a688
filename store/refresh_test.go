package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
)

func rotate(t *testing.T, db *DB, old, next string, at time.Time) (*accounts.RefreshToken, error) {
	t.Helper()
	return db.RotateRefreshToken(context.Background(), old, &accounts.RefreshToken{Hash: next, ExpiresAt: at.Add(time.Hour)}, at)
}

func TestRefreshTokenRotatesAlongItsFamily(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h1", UserID: "u1", Family: "f1", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i, step := range [][2]string{{"h1", "h2"}, {"h2", "h3"}, {"h3", "h4"}} {
		old, err := rotate(t, db, step[0], step[1], t0.Add(time.Duration(i)*time.Minute))
		if err != nil || old.UserID != "u1" || old.Family != "f1" {
			t.Fatalf("rotate %s: %+v, %v", step[0], old, err)
		}
	}
	if live, err := db.RefreshFamilyLive(ctx, "f1"); err != nil || !live {
		t.Fatalf("family live = %v, %v; want true", live, err)
	}
}

func TestReusedRefreshTokenRevokesItsFamily(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	for _, tok := range []*accounts.RefreshToken{
		{Hash: "a1", UserID: "u1", Family: "fa", ExpiresAt: t0.Add(time.Hour)},
		{Hash: "b1", UserID: "u1", Family: "fb", ExpiresAt: t0.Add(time.Hour)}, // another login
	} {
		if err := db.PutRefreshToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rotate(t, db, "a1", "a2", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := rotate(t, db, "a2", "a3", t0); err != nil {
		t.Fatal(err)
	}
	old, err := rotate(t, db, "a1", "x", t0)
	if !errors.Is(err, accounts.ErrTokenReused) || old == nil || old.UserID != "u1" {
		t.Fatalf("reusing a1: %+v, %v; want ErrTokenReused with the token", old, err)
	}
	for _, h := range []string{"a1", "a2", "a3", "x"} {
		if _, err := rotate(t, db, h, "y", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
			t.Fatalf("%s after reuse: got %v, want ErrNotFound", h, err)
		}
	}
	if live, _ := db.RefreshFamilyLive(ctx, "fa"); live {
		t.Fatal("revoked family is still live")
	}
	if _, err := rotate(t, db, "b1", "b2", t0); err != nil {
		t.Fatalf("the other login was revoked too: %v", err)
	}
}

func TestRefreshTokenExpires(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h1", UserID: "u1", Family: "f", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// h2 inherited u1, and is expired at its expiry instant.
	if _, err := rotate(t, db, "h1", "h2", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := rotate(t, db, "h2", "h3", t0.Add(time.Hour)); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("expired h2: got %v, want ErrNotFound", err)
	}
	// Both are gone: h2 was deleted, and h1, rotated, expired with it.
	if live, _ := db.RefreshFamilyLive(ctx, "f"); live {
		t.Fatal("expired family kept its index")
	}
}

func TestRotationShedsExpiredTokensOfTheFamily(t *testing.T) {
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

func TestRefreshTokenWithoutFamilyIsItsOwnFamily(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	// A record as written before families existed.
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

func TestRevokeRefreshFamilyIsIdempotent(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h", UserID: "u", Family: "f", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := rotate(t, db, "h", "h2", t0); err != nil {
		t.Fatal(err)
	}
	// Logging out with the rotated token revokes the current one too, and
	// names the user once; the second time there is nothing left.
	for i, want := range []string{"u", ""} {
		user, err := db.RevokeRefreshFamily(ctx, "h")
		if err != nil || user != want {
			t.Fatalf("RevokeRefreshFamily #%d = %q, %v; want user %q", i+1, user, err, want)
		}
	}
	if _, err := rotate(t, db, "h2", "h3", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
		t.Fatalf("revoked token rotated: %v", err)
	}
}
