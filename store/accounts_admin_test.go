package store

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
)

func newAdmin(t *testing.T, db *DB, id string, i int) {
	t.Helper()
	u := newUser(id, id+"@x.io", i)
	u.IsAdmin = true
	if err := db.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
}

func countAdmins(t *testing.T, db *DB) int {
	t.Helper()
	users, _, err := db.Users(context.Background(), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range users {
		if u.IsAdmin {
			n++
		}
	}
	return n
}

// Two admins demoting each other at the same moment: bbolt serialises the
// two transactions, and the second sees that it would remove the last admin.
func TestConcurrentMutualDemotionKeepsOneAdmin(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	for round := range 20 {
		a, b := "a"+string(rune('a'+round)), "b"+string(rune('a'+round))
		newAdmin(t, db, a, 2*round)
		newAdmin(t, db, b, 2*round+1)
		// Only the pair of this round may be admins: demote the previous
		// round's survivor first (allowed: a or b of this round remains).
		users, _, _ := db.Users(ctx, 100, 0)
		for _, u := range users {
			if u.IsAdmin && u.ID != a && u.ID != b {
				if _, err := db.SetAdmin(ctx, u.ID, false); err != nil {
					t.Fatalf("demote %s: %v", u.ID, err)
				}
			}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i, id := range []string{b, a} { // a demotes b, b demotes a
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, errs[i] = db.SetAdmin(ctx, id, false)
			}()
		}
		close(start)
		wg.Wait()
		ok, last := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, accounts.ErrLastAdmin):
				last++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if ok != 1 || last != 1 {
			t.Fatalf("round %d: %d demotions succeeded and %d refused as last admin, want 1 and 1", round, ok, last)
		}
		if n := countAdmins(t, db); n != 1 {
			t.Fatalf("round %d: %d admins left, want 1", round, n)
		}
	}
}

func TestLastAdminCannotBeDeletedOrDemoted(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	newAdmin(t, db, "boss", 0)
	if err := db.CreateUser(ctx, newUser("pleb", "pleb@x.io", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetAdmin(ctx, "boss", false); !errors.Is(err, accounts.ErrLastAdmin) {
		t.Fatalf("demote the only admin: %v, want ErrLastAdmin", err)
	}
	if err := db.DeleteUser(ctx, "boss"); !errors.Is(err, accounts.ErrLastAdmin) {
		t.Fatalf("delete the only admin: %v, want ErrLastAdmin", err)
	}
	// A user who is no admin can always be demoted (a no-op) and deleted.
	if _, err := db.SetAdmin(ctx, "pleb", false); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "pleb"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "pleb"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("delete twice: %v, want ErrUserNotFound", err)
	}
}

func TestDeleteUserRemovesEverythingTheyHeld(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	u := newUser("gone", "Gone@x.io", 0)
	u.Groups = []string{"ops"}
	if err := db.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUser(ctx, &accounts.User{ID: "stay", Email: "stay@x.io", Groups: []string{"ops"}, CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "gone@x.io", nil, accounts.LinkRule{EmailVerified: true}); err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(time.Hour)
	for _, rt := range []*accounts.RefreshToken{
		{Hash: "r1", UserID: "gone", Family: "f1", ExpiresAt: exp},
		{Hash: "r2", UserID: "gone", Family: "f2", ExpiresAt: exp},
		{Hash: "r3", UserID: "stay", Family: "f3", ExpiresAt: exp},
	} {
		if err := db.PutRefreshToken(ctx, rt); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateAPIKey(ctx, &accounts.APIKey{Hash: "k1", Prefix: "appk_111", UserID: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteUser(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UserByEmail(ctx, "gone@x.io"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("email lookup after delete: %v", err)
	}
	for _, f := range []string{"f1", "f2"} {
		if live, _ := db.RefreshFamilyLive(ctx, f); live {
			t.Errorf("refresh family %s still live", f)
		}
	}
	if live, _ := db.RefreshFamilyLive(ctx, "f3"); !live {
		t.Error("another user's refresh tokens were revoked")
	}
	if _, err := db.APIKeyByHash(ctx, "k1"); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
		t.Errorf("api key after delete: %v", err)
	}
	// The OIDC identity no longer leads to the deleted user: it provisions
	// a new one.
	fresh := newUser("new", "gone@x.io", 5)
	got, err := db.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "gone@x.io", fresh, accounts.LinkRule{EmailVerified: true})
	if err != nil || got.ID != "new" {
		t.Fatalf("provision after delete = %+v, %v; want the new user", got, err)
	}
	_, total, _ := db.Users(ctx, 10, 0)
	groups, _ := db.Groups(ctx)
	if total != 2 || len(groups) != 1 || groups[0] != "ops" {
		t.Fatalf("total %d, groups %v; want 2 users and [ops]", total, groups)
	}
}

func TestSetPasswordRevokesOtherLoginsAndOnRequestTheKeys(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.CreateUser(ctx, newUser("u", "u@x.io", 0)); err != nil {
		t.Fatal(err)
	}
	exp := t0.Add(time.Hour)
	for _, h := range []string{"this", "other", "third"} {
		if err := db.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: h, UserID: "u", Family: "fam-" + h, ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []*accounts.APIKey{{Hash: "k1", Prefix: "appk_111", UserID: "u"}, {Hash: "k2", Prefix: "appk_222", UserID: "u"}} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	u, err := db.SetPassword(ctx, "u", "$argon2id$new", "fam-this", false)
	if err != nil || u.PasswordHash != "$argon2id$new" {
		t.Fatalf("SetPassword = %+v, %v", u, err)
	}
	for fam, want := range map[string]bool{"fam-this": true, "fam-other": false, "fam-third": false} {
		if live, _ := db.RefreshFamilyLive(ctx, fam); live != want {
			t.Errorf("family %s live = %v, want %v", fam, live, want)
		}
	}
	if keys, _ := db.APIKeys(ctx, "u"); len(keys) != 2 {
		t.Fatalf("SetPassword without revokeKeys left %d keys, want 2", len(keys))
	}
	if _, err := db.SetPassword(ctx, "u", "$argon2id$newer", "", true); err != nil {
		t.Fatal(err)
	}
	if live, _ := db.RefreshFamilyLive(ctx, "fam-this"); live {
		t.Error(`SetPassword with keepFamily "" left a login`)
	}
	for _, h := range []string{"k1", "k2"} {
		if _, err := db.APIKeyByHash(ctx, h); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
			t.Errorf("api key %s after SetPassword with revokeKeys: %v", h, err)
		}
	}
	if keys, _ := db.APIKeys(ctx, "u"); len(keys) != 0 {
		t.Errorf("SetPassword with revokeKeys left %d keys listed", len(keys))
	}
	if _, err := db.SetPassword(ctx, "ghost", "x", "", true); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("SetPassword(ghost): %v", err)
	}
}

// A database from before the per-user index of refresh tokens gets it at
// open, so a password change or deletion revokes those older tokens too,
// including records from before token families.
func TestOpenIndexesOlderRefreshTokensByUser(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	if err := db.CreateUser(ctx, newUser("u", "u@x.io", 0)); err != nil {
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
