package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

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
	if err := db.CreateAPIKey(ctx, &accounts.APIKey{Hash: "hd", Prefix: "appk_aaa", UserID: "u1"}); !errors.Is(err, accounts.ErrAPIKeyPrefixTaken) {
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

	if err := db.DeleteAPIKey(ctx, "u2", "appk_bbb"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("deleting someone else's key: got %v, want ErrNotFound", err)
	}
	if err := db.DeleteAPIKey(ctx, "u1", "appk_aaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.APIKeyByHash(ctx, "ha"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
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
	if err := db.TouchAPIKey(ctx, "missing", at); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("touching a missing key: got %v, want ErrNotFound", err)
	}
}
