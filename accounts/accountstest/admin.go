package accountstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

func lastAdmin(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	newAdmin(t, s, "boss", 0)
	createUsers(t, s, newUser("pleb", "pleb@x.io", 1))
	if _, err := s.SetAdmin(ctx, "boss", false); !errors.Is(err, accounts.ErrLastAdmin) {
		t.Fatalf("demote the only admin: %v, want ErrLastAdmin", err)
	}
	if err := s.DeleteUser(ctx, "boss"); !errors.Is(err, accounts.ErrLastAdmin) {
		t.Fatalf("delete the only admin: %v, want ErrLastAdmin", err)
	}
	// A user who is no admin can always be demoted (a no-op) and deleted.
	if _, err := s.SetAdmin(ctx, "pleb", false); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, "pleb"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteUser(ctx, "pleb"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("delete twice: %v, want ErrUserNotFound", err)
	}
	if _, err := s.SetAdmin(ctx, "pleb", true); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("SetAdmin of a deleted user: %v, want ErrUserNotFound", err)
	}
	// With a second admin, the first may go.
	newAdmin(t, s, "deputy", 2)
	if err := s.DeleteUser(ctx, "boss"); err != nil {
		t.Fatalf("delete an admin while another remains: %v", err)
	}
	if n := countAdmins(t, s); n != 1 {
		t.Fatalf("%d admins left, want 1", n)
	}
}

func deleteUser(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	u := newUser("gone", "Gone@x.io", 0)
	u.Groups = []string{"ops"}
	createUsers(t, s, u, &accounts.User{ID: "stay", Email: "stay@x.io", Groups: []string{"ops"}, CreatedAt: t0})
	if _, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "gone@x.io", nil, accounts.LinkRule{EmailVerified: true}); err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(time.Hour)
	putTokens(t, s,
		&accounts.RefreshToken{Hash: "r1", UserID: "gone", Family: "f1", ExpiresAt: exp},
		&accounts.RefreshToken{Hash: "r2", UserID: "gone", Family: "f2", ExpiresAt: exp},
		&accounts.RefreshToken{Hash: "r3", UserID: "stay", Family: "f3", ExpiresAt: exp},
	)
	createKeys(t, s, &accounts.APIKey{Hash: "k1", Prefix: "appk_111", UserID: "gone"})
	if err := s.DeleteUser(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByEmail(ctx, "gone@x.io"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("email lookup after delete: %v", err)
	}
	for _, f := range []string{"f1", "f2"} {
		if live, _ := s.RefreshFamilyLive(ctx, f); live {
			t.Errorf("refresh family %s still live", f)
		}
	}
	if live, _ := s.RefreshFamilyLive(ctx, "f3"); !live {
		t.Error("another user's refresh tokens were revoked")
	}
	if _, err := s.APIKeyByHash(ctx, "k1"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Errorf("api key after delete: %v", err)
	}
	// The OIDC identity no longer leads to the deleted user: it provisions
	// a new one.
	fresh := newUser("new", "gone@x.io", 5)
	got, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "gone@x.io", fresh, accounts.LinkRule{EmailVerified: true})
	if err != nil || got.ID != "new" {
		t.Fatalf("provision after delete = %+v, %v; want the new user", got, err)
	}
	_, total, _ := s.Users(ctx, 10, 0)
	groups, _ := s.Groups(ctx)
	if total != 2 || len(groups) != 1 || groups[0] != "ops" {
		t.Fatalf("total %d, groups %v; want 2 users and [ops]", total, groups)
	}
}

func setPassword(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	createUsers(t, s, newUser("u", "u@x.io", 0), newUser("v", "v@x.io", 1))
	exp := t0.Add(time.Hour)
	for _, h := range []string{"this", "other", "third"} {
		putTokens(t, s, &accounts.RefreshToken{Hash: h, UserID: "u", Family: "fam-" + h, ExpiresAt: exp})
	}
	putTokens(t, s, &accounts.RefreshToken{Hash: "v1", UserID: "v", Family: "fam-v", ExpiresAt: exp})
	createKeys(t, s,
		&accounts.APIKey{Hash: "k1", Prefix: "appk_111", UserID: "u"},
		&accounts.APIKey{Hash: "k2", Prefix: "appk_222", UserID: "u"},
		&accounts.APIKey{Hash: "kv", Prefix: "appk_111", UserID: "v"},
	)
	u, err := s.SetPassword(ctx, "u", "$argon2id$new", "fam-this", false)
	if err != nil || u.PasswordHash != "$argon2id$new" {
		t.Fatalf("SetPassword = %+v, %v", u, err)
	}
	if stored, err := s.User(ctx, "u"); err != nil || stored.PasswordHash != "$argon2id$new" {
		t.Fatalf("stored after SetPassword: %+v, %v", stored, err)
	}
	for fam, want := range map[string]bool{"fam-this": true, "fam-other": false, "fam-third": false} {
		if live, _ := s.RefreshFamilyLive(ctx, fam); live != want {
			t.Errorf("family %s live = %v, want %v", fam, live, want)
		}
	}
	if keys, _ := s.APIKeys(ctx, "u"); len(keys) != 2 {
		t.Fatalf("SetPassword without revokeKeys left %d keys, want 2", len(keys))
	}
	if _, err := s.SetPassword(ctx, "u", "$argon2id$newer", "", true); err != nil {
		t.Fatal(err)
	}
	if live, _ := s.RefreshFamilyLive(ctx, "fam-this"); live {
		t.Error(`SetPassword with keepFamily "" left a login`)
	}
	for _, h := range []string{"k1", "k2"} {
		if _, err := s.APIKeyByHash(ctx, h); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
			t.Errorf("api key %s after SetPassword with revokeKeys: %v", h, err)
		}
	}
	if keys, _ := s.APIKeys(ctx, "u"); len(keys) != 0 {
		t.Errorf("SetPassword with revokeKeys left %d keys listed", len(keys))
	}
	if live, _ := s.RefreshFamilyLive(ctx, "fam-v"); !live {
		t.Error("another user's login was revoked")
	}
	if _, err := s.APIKeyByHash(ctx, "kv"); err != nil {
		t.Errorf("another user's key was revoked: %v", err)
	}
	if _, err := s.SetPassword(ctx, "ghost", "x", "", true); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("SetPassword(ghost): %v", err)
	}
}
