package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/accounts"
	"github.com/appliance-sh/appliance/engine"
)

func TestRefreshTokenRotatesOnceAndExpires(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h1", UserID: "u1", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	old, err := db.RotateRefreshToken(ctx, "h1", &accounts.RefreshToken{Hash: "h2", ExpiresAt: t0.Add(2 * time.Hour)}, t0)
	if err != nil || old.UserID != "u1" {
		t.Fatalf("rotate h1: %+v, %v", old, err)
	}
	if _, err := db.RotateRefreshToken(ctx, "h1", &accounts.RefreshToken{Hash: "h3", ExpiresAt: t0.Add(2 * time.Hour)}, t0); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("reusing h1: got %v, want ErrNotFound", err)
	}
	// h2 inherited u1, and is expired at its expiry instant.
	if _, err := db.RotateRefreshToken(ctx, "h2", &accounts.RefreshToken{Hash: "h4", ExpiresAt: t0.Add(3 * time.Hour)}, t0.Add(2*time.Hour)); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("expired h2: got %v, want ErrNotFound", err)
	}
	// The expired token was deleted, and its replacement never stored.
	for _, h := range []string{"h2", "h4"} {
		if _, err := db.RotateRefreshToken(ctx, h, &accounts.RefreshToken{Hash: "h5", ExpiresAt: t0.Add(time.Hour)}, t0); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s after expiry: got %v, want ErrNotFound", h, err)
		}
	}
}

func TestDeleteRefreshTokenIsIdempotent(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h", UserID: "u", ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := db.DeleteRefreshToken(ctx, "h"); err != nil {
			t.Fatalf("DeleteRefreshToken: %v", err)
		}
	}
	if _, err := db.RotateRefreshToken(ctx, "h", &accounts.RefreshToken{Hash: "h2"}, t0); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("deleted token rotated: %v", err)
	}
}

func TestAPIKeysAreListedAndRevokedPerOwner(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	keys := []*accounts.APIKey{
		{Hash: "hb", Prefix: "appk_bbb", Name: "ci", UserID: "u1", CreatedAt: t0},
		{Hash: "ha", Prefix: "appk_aaa", Name: "laptop", UserID: "u1", CreatedAt: t0},
		{Hash: "hc", Prefix: "appk_aaa", Name: "other", UserID: "u2", CreatedAt: t0},
	}
	for _, k := range keys {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey %s: %v", k.Hash, err)
		}
	}
	if err := db.CreateAPIKey(ctx, &accounts.APIKey{Hash: "hd", Prefix: "appk_aaa", UserID: "u1"}); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("duplicate prefix for one user: got %v, want ErrConflict", err)
	}
	list, err := db.APIKeys(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range list {
		names = append(names, k.Name)
	}
	if !reflect.DeepEqual(names, []string{"laptop", "ci"}) {
		t.Fatalf("u1's keys = %v, want [laptop ci] (by prefix)", names)
	}

	if err := db.DeleteAPIKey(ctx, "u2", "appk_bbb"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("deleting someone else's key: got %v, want ErrNotFound", err)
	}
	if err := db.DeleteAPIKey(ctx, "u1", "appk_aaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APIKeyByHash(ctx, "ha"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("revoked key still found: %v", err)
	}
	if k, err := db.APIKeyByHash(ctx, "hc"); err != nil || k.UserID != "u2" {
		t.Fatalf("u2's key with the same prefix: %+v, %v", k, err)
	}
}

func TestTouchAPIKeyRecordsLastUse(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.CreateAPIKey(ctx, &accounts.APIKey{Hash: "h", Prefix: "appk_abc", UserID: "u", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	if err := db.TouchAPIKey(ctx, "h", at); err != nil {
		t.Fatal(err)
	}
	k, err := db.APIKeyByHash(ctx, "h")
	if err != nil || k.LastUsedAt == nil || !k.LastUsedAt.Equal(at) {
		t.Fatalf("after touch: %+v, %v", k, err)
	}
	if err := db.TouchAPIKey(ctx, "missing", at); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("touching a missing key: got %v, want ErrNotFound", err)
	}
}
