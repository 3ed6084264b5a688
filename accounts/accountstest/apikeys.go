package accountstest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

func apiKeysPerOwner(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	createKeys(t, s,
		&accounts.APIKey{Hash: "hb", Prefix: "appk_bbb", Name: "ci", UserID: "u1", CreatedAt: t0},
		&accounts.APIKey{Hash: "ha", Prefix: "appk_aaa", Name: "laptop", UserID: "u1", CreatedAt: t0},
		&accounts.APIKey{Hash: "hc", Prefix: "appk_aaa", Name: "other", UserID: "u2", CreatedAt: t0},
		&accounts.APIKey{Hash: "hB", Prefix: "appk_BBB", Name: "upper", UserID: "u1", CreatedAt: t0},
	)
	if err := s.CreateAPIKey(ctx, &accounts.APIKey{Hash: "hd", Prefix: "appk_aaa", UserID: "u1"}); !errors.Is(err, accounts.ErrAPIKeyPrefixTaken) {
		t.Fatalf("duplicate prefix for one user: got %v, want ErrAPIKeyPrefixTaken", err)
	}
	list, err := s.APIKeys(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range list {
		names = append(names, k.Name)
	}
	if !reflect.DeepEqual(names, []string{"upper", "laptop", "ci"}) {
		t.Fatalf("u1's keys = %v, want [upper laptop ci] (by prefix, in byte order)", names)
	}
	if list, err := s.APIKeys(ctx, "nobody"); err != nil || list == nil || len(list) != 0 {
		t.Fatalf("keys of a user without any = %#v, %v; want an empty list", list, err)
	}

	if err := s.DeleteAPIKey(ctx, "u2", "appk_bbb"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("deleting someone else's key: got %v, want ErrAPIKeyNotFound", err)
	}
	if err := s.DeleteAPIKey(ctx, "u1", "appk_aaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.APIKeyByHash(ctx, "ha"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("revoked key still found: %v", err)
	}
	if k, err := s.APIKeyByHash(ctx, "hc"); err != nil || k.UserID != "u2" {
		t.Fatalf("u2's key with the same prefix: %+v, %v", k, err)
	}
	if err := s.DeleteAPIKey(ctx, "u1", "appk_aaa"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("deleting a key twice: got %v, want ErrAPIKeyNotFound", err)
	}
	// The prefix is free again once its key is revoked.
	createKeys(t, s, &accounts.APIKey{Hash: "he", Prefix: "appk_aaa", Name: "new laptop", UserID: "u1", CreatedAt: t0})
}

func apiKeyTouch(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	createKeys(t, s, &accounts.APIKey{Hash: "h", Prefix: "appk_abc", UserID: "u", CreatedAt: t0})
	at := t0.Add(time.Minute)
	if err := s.TouchAPIKey(ctx, "h", at); err != nil {
		t.Fatal(err)
	}
	k, err := s.APIKeyByHash(ctx, "h")
	if err != nil || k.LastUsedAt == nil || !k.LastUsedAt.Equal(at) {
		t.Fatalf("after touch: %+v, %v", k, err)
	}
	if err := s.TouchAPIKey(ctx, "missing", at); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Fatalf("touching a missing key: got %v, want ErrAPIKeyNotFound", err)
	}
	if list, err := s.APIKeys(ctx, "u"); err != nil || len(list) != 1 || list[0].LastUsedAt == nil || !list[0].LastUsedAt.Equal(at) {
		t.Fatalf("listed after touch: %+v, %v", list, err)
	}
}
