package accountstest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

func emailUniqueInAnyCase(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	if err := s.CreateUser(ctx, newUser("u1", "Ada@Example.com", 0)); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if err := s.CreateUser(ctx, newUser("u2", "ada@example.COM", 1)); !errors.Is(err, accounts.ErrEmailTaken) {
		t.Fatalf("duplicate email: got %v, want ErrEmailTaken", err)
	}
	u, err := s.UserByEmail(ctx, "ADA@example.com")
	if err != nil || u.ID != "u1" || u.Email != "Ada@Example.com" {
		t.Fatalf("UserByEmail = %+v, %v; want u1 with its email as given", u, err)
	}
	if _, err := s.User(ctx, "nobody"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("User(nobody): got %v, want ErrUserNotFound", err)
	}
	if _, err := s.UserByEmail(ctx, "nobody@x.io"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("UserByEmail(nobody): got %v, want ErrUserNotFound", err)
	}
}

func usersPage(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	for i, id := range []string{"c", "a", "b"} {
		createUsers(t, s, newUser(id, id+"@x.io", i))
	}
	tests := []struct {
		limit, offset int
		want          []string
	}{
		{0, 0, []string{"c", "a", "b"}},
		{2, 0, []string{"c", "a"}},
		{2, 2, []string{"b"}},
		{2, 5, nil},
	}
	for _, tt := range tests {
		users, total, err := s.Users(ctx, tt.limit, tt.offset)
		if err != nil {
			t.Fatalf("Users: %v", err)
		}
		var got []string
		for _, u := range users {
			got = append(got, u.ID)
		}
		if !reflect.DeepEqual(got, tt.want) || total != 3 {
			t.Errorf("Users(%d, %d) = %v total %d; want %v total 3", tt.limit, tt.offset, got, total, tt.want)
		}
	}
	// Users created in the same instant come in id order.
	createUsers(t, s, newUser("z2", "z2@x.io", 9), newUser("z1", "z1@x.io", 9))
	users, total, err := s.Users(ctx, 2, 3)
	if err != nil || total != 5 || len(users) != 2 || users[0].ID != "z1" || users[1].ID != "z2" {
		t.Fatalf("Users(2, 3) = %v total %d, %v; want [z1 z2] total 5", users, total, err)
	}
}

func groups(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	for i, id := range []string{"u1", "u2"} {
		createUsers(t, s, newUser(id, id+"@x.io", i))
	}
	steps := []struct {
		user   string
		groups []string
		want   []string
	}{
		{"u1", []string{"ops", "dev", "ops"}, []string{"dev", "ops"}},
		{"u2", []string{"dev", "qa"}, []string{"dev", "ops", "qa"}},
		{"u1", []string{}, []string{"dev", "qa"}},
		{"u2", []string{"qa"}, []string{"qa"}},
		// Byte order, whatever the database's collation says.
		{"u1", []string{"b", "B", "a_b", "ab"}, []string{"B", "a_b", "ab", "b", "qa"}},
	}
	for i, st := range steps {
		u, err := s.SetGroups(ctx, st.user, st.groups)
		if err != nil {
			t.Fatalf("step %d: SetGroups: %v", i, err)
		}
		if len(st.groups) > 0 && u.Groups[0] > u.Groups[len(u.Groups)-1] {
			t.Errorf("step %d: groups %v are not sorted", i, u.Groups)
		}
		got, err := s.Groups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: Groups = %v, want %v", i, got, st.want)
		}
	}
	if _, err := s.SetGroups(ctx, "ghost", []string{"x"}); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("SetGroups(ghost): got %v, want ErrUserNotFound", err)
	}
	if u, err := s.User(ctx, "u1"); err != nil || !reflect.DeepEqual(u.Groups, []string{"B", "a_b", "ab", "b"}) {
		t.Fatalf("stored groups of u1: %+v, %v", u, err)
	}
}

// Every field comes back as it was stored: the store keeps the record, not
// only the columns it indexes.
func recordsRoundTrip(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	created := t0.Add(1234567 * time.Microsecond)
	u := &accounts.User{ID: "u1", Email: "Ada@x.io", Name: ptr("Ada \"Countess\" Lovelace ✓ \x00"), PasswordHash: "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA",
		IsAdmin: true, Groups: []string{"dev", "ops"}, CreatedAt: created}
	createUsers(t, s, u)
	got, err := s.User(ctx, "u1")
	if err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("User = %+v, %v; want %+v", got, err, u)
	}
	k := &accounts.APIKey{Hash: "h1", Prefix: "appk_1", Name: "ci", UserID: "u1", CreatedAt: created, ExpiresAt: ptr(created.Add(time.Hour))}
	createKeys(t, s, k)
	gotKey, err := s.APIKeyByHash(ctx, "h1")
	if err != nil || !reflect.DeepEqual(gotKey, k) {
		t.Fatalf("APIKeyByHash = %+v, %v; want %+v", gotKey, err, k)
	}
	tok := &accounts.RefreshToken{Hash: "r1", UserID: "u1", Family: "f1", CreatedAt: created, ExpiresAt: created.Add(time.Hour)}
	putTokens(t, s, tok)
	old, err := s.RotateRefreshToken(ctx, "r1", &accounts.RefreshToken{Hash: "r2", CreatedAt: created, ExpiresAt: created.Add(2 * time.Hour)}, created.Add(time.Minute))
	want := *tok
	want.RotatedAt = ptr(created.Add(time.Minute))
	if err != nil || !reflect.DeepEqual(old, &want) {
		t.Fatalf("RotateRefreshToken = %+v, %v; want %+v", old, err, &want)
	}
}

// Names no record can have (a NUL byte, bytes that are not UTF-8) are
// simply not found: a lookup never fails for what it is asked.
func unstorableLookups(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	createUsers(t, s, newUser("u1", "u1@x.io", 0))
	for _, name := range []string{"u1\x00", "\xff\xfe"} {
		if _, err := s.User(ctx, name); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Errorf("User(%q): got %v, want ErrUserNotFound", name, err)
		}
		if _, err := s.UserByEmail(ctx, name); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Errorf("UserByEmail(%q): got %v, want ErrUserNotFound", name, err)
		}
		if _, err := s.SetAdmin(ctx, name, true); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Errorf("SetAdmin(%q): got %v, want ErrUserNotFound", name, err)
		}
		if err := s.DeleteUser(ctx, name); !errors.Is(err, accounts.ErrUserNotFound) {
			t.Errorf("DeleteUser(%q): got %v, want ErrUserNotFound", name, err)
		}
		if _, err := s.APIKeyByHash(ctx, name); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
			t.Errorf("APIKeyByHash(%q): got %v, want ErrAPIKeyNotFound", name, err)
		}
		if err := s.TouchAPIKey(ctx, name, t0); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
			t.Errorf("TouchAPIKey(%q): got %v, want ErrAPIKeyNotFound", name, err)
		}
		if err := s.DeleteAPIKey(ctx, "u1", name); !errors.Is(err, accounts.ErrAPIKeyNotFound) {
			t.Errorf("DeleteAPIKey(%q): got %v, want ErrAPIKeyNotFound", name, err)
		}
		if keys, err := s.APIKeys(ctx, name); err != nil || len(keys) != 0 {
			t.Errorf("APIKeys(%q) = %v, %v; want none", name, keys, err)
		}
		if _, err := rotate(s, name, "x", t0); !errors.Is(err, accounts.ErrRefreshTokenNotFound) {
			t.Errorf("RotateRefreshToken(%q): got %v, want ErrRefreshTokenNotFound", name, err)
		}
		if user, err := s.RevokeRefreshFamily(ctx, name); err != nil || user != "" {
			t.Errorf("RevokeRefreshFamily(%q) = %q, %v; want no user", name, user, err)
		}
		if live, err := s.RefreshFamilyLive(ctx, name); err != nil || live {
			t.Errorf("RefreshFamilyLive(%q) = %v, %v; want false", name, live, err)
		}
	}
}

// Records the store cannot keep are refused with ErrInvalidRecord, and
// nothing of them is stored.
func invalidRecords(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	createUsers(t, s, newUser("u1", "u1@x.io", 0))
	withGroups := newUser("u3", "u3@x.io", 1)
	withGroups.Groups = []string{"ok", "bad\x00group"}
	tests := []struct {
		name string
		err  error
	}{
		{"a user without an id", s.CreateUser(ctx, newUser("", "a@x.io", 1))},
		{"a user without an email", s.CreateUser(ctx, newUser("u2", "", 1))},
		{"a user id with a NUL byte", s.CreateUser(ctx, newUser("u\x002", "b@x.io", 1))},
		{"a group with a NUL byte", s.CreateUser(ctx, withGroups)},
		{"a user id already in use", s.CreateUser(ctx, newUser("u1", "other@x.io", 1))},
		{"a refresh token without a hash", s.PutRefreshToken(ctx, &accounts.RefreshToken{UserID: "u1", ExpiresAt: t0})},
		{"a refresh token without a user", s.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h", ExpiresAt: t0})},
		{"a refresh family with a NUL byte", s.PutRefreshToken(ctx, &accounts.RefreshToken{Hash: "h", UserID: "u1", Family: "f\x00", ExpiresAt: t0})},
		{"an api key without a prefix", s.CreateAPIKey(ctx, &accounts.APIKey{Hash: "k", UserID: "u1"})},
		{"an api key without a hash", s.CreateAPIKey(ctx, &accounts.APIKey{Prefix: "appk_1", UserID: "u1"})},
		{"an api key without a user", s.CreateAPIKey(ctx, &accounts.APIKey{Hash: "k", Prefix: "appk_1"})},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, accounts.ErrInvalidRecord) {
			t.Errorf("%s: got %v, want ErrInvalidRecord", tt.name, tt.err)
		}
	}
	if _, _, err := s.Users(ctx, 10, -1); !errors.Is(err, accounts.ErrInvalidRecord) {
		t.Errorf("a negative offset: got %v, want ErrInvalidRecord", err)
	}
	if _, err := s.SetGroups(ctx, "u1", []string{"x\x00"}); !errors.Is(err, accounts.ErrInvalidRecord) {
		t.Errorf("SetGroups with a NUL byte: got %v, want ErrInvalidRecord", err)
	}
	if _, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "p\x00", Subject: "s"}, "n@x.io", newUser("n", "n@x.io", 2), accounts.LinkRule{EmailVerified: true}); !errors.Is(err, accounts.ErrInvalidRecord) {
		t.Errorf("a provider with a NUL byte: got %v, want ErrInvalidRecord", err)
	}
	if _, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "p", Subject: "s"}, "n@x.io", nil, accounts.LinkRule{EmailVerified: true}); !errors.Is(err, accounts.ErrInvalidRecord) {
		t.Errorf("no user to create: got %v, want ErrInvalidRecord", err)
	}
	users, total, err := s.Users(ctx, 10, 0)
	if err != nil || total != 1 || len(users) != 1 {
		t.Fatalf("users after the refusals: %d of %d, %v; want only u1", len(users), total, err)
	}
	if g, err := s.Groups(ctx); err != nil || len(g) != 0 {
		t.Fatalf("groups after the refusals: %v, %v; want none", g, err)
	}
	if keys, err := s.APIKeys(ctx, "u1"); err != nil || len(keys) != 0 {
		t.Fatalf("api keys after the refusals: %v, %v; want none", keys, err)
	}
}

func provisionThreeRules(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	existing := newUser("u-existing", "known@x.io", 0)
	existing.PasswordHash = "$argon2id$..."
	createUsers(t, s, existing)
	link := func(provider, subject string) accounts.AuthLink {
		return accounts.AuthLink{Provider: provider, Subject: subject, CreatedAt: t0}
	}
	tests := []struct {
		name     string
		link     accounts.AuthLink
		email    string
		newID    string
		wantID   string
		wantOIDC []string
	}{
		{"a new email creates a user", link("google", "g-1"), "new@x.io", "u-new", "u-new", []string{"google"}},
		{"an existing email is linked", link("google", "g-2"), "KNOWN@x.io", "u-unused", "u-existing", []string{"google"}},
		{"a link wins over the email", link("google", "g-2"), "new@x.io", "u-unused2", "u-existing", []string{"google"}},
		{"a second provider adds a method", link("okta", "o-1"), "known@x.io", "u-unused3", "u-existing", []string{"google", "okta"}},
	}
	for _, tt := range tests {
		u, err := s.ProvisionLinkedUser(ctx, tt.link, tt.email, newUser(tt.newID, tt.email, 1), accounts.LinkRule{EmailVerified: true})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if u.ID != tt.wantID || !reflect.DeepEqual(u.OIDCProviders, tt.wantOIDC) {
			t.Errorf("%s: got user %s with providers %v; want %s with %v", tt.name, u.ID, u.OIDCProviders, tt.wantID, tt.wantOIDC)
		}
		stored, err := s.User(ctx, u.ID)
		if err != nil || !reflect.DeepEqual(stored.OIDCProviders, tt.wantOIDC) {
			t.Errorf("%s: stored user %+v, %v", tt.name, stored, err)
		}
	}
	_, total, err := s.Users(ctx, 0, 0)
	if err != nil || total != 2 {
		t.Fatalf("users total = %d, %v; want 2 (existing and new)", total, err)
	}
	if u, err := s.User(ctx, "u-existing"); err != nil || u.PasswordHash != "$argon2id$..." {
		t.Fatalf("linking lost the user's password: %+v, %v", u, err)
	}
}

func provisionRule(t *testing.T, s accounts.UserStore) {
	ctx := context.Background()
	admin := newUser("u-admin", "root@x.io", 0)
	admin.IsAdmin = true
	createUsers(t, s, admin, newUser("u-plain", "plain@x.io", 1))
	link := func(subject string) accounts.AuthLink {
		return accounts.AuthLink{Provider: "idp", Subject: subject, CreatedAt: t0}
	}
	verified := accounts.LinkRule{EmailVerified: true}
	tests := []struct {
		name    string
		subject string
		email   string
		rule    accounts.LinkRule
		wantErr error
		wantID  string
	}{
		{"an unverified email links no user", "s-1", "plain@x.io", accounts.LinkRule{LinkAdmins: true}, accounts.ErrEmailUnverified, ""},
		{"an unverified email creates no user", "s-2", "fresh@x.io", accounts.LinkRule{}, accounts.ErrEmailUnverified, ""},
		{"an admin is not linked by email", "s-3", "ROOT@x.io", verified, accounts.ErrAdminNotLinked, ""},
		{"a verified email links a user", "s-1", "plain@x.io", verified, nil, "u-plain"},
		{"an identity already linked needs no verified email", "s-1", "other@x.io", accounts.LinkRule{}, nil, "u-plain"},
		{"an admin is linked where the provider allows it", "s-3", "root@x.io", accounts.LinkRule{EmailVerified: true, LinkAdmins: true}, nil, "u-admin"},
	}
	for _, tt := range tests {
		u, err := s.ProvisionLinkedUser(ctx, link(tt.subject), tt.email, newUser("u-new-"+tt.subject, tt.email, 2), tt.rule)
		if tt.wantErr != nil {
			if !errors.Is(err, tt.wantErr) || u != nil {
				t.Errorf("%s: got %+v, %v; want %v", tt.name, u, err, tt.wantErr)
			}
			continue
		}
		if err != nil || u.ID != tt.wantID {
			t.Errorf("%s: got %+v, %v; want user %s", tt.name, u, err, tt.wantID)
		}
	}
	if _, total, err := s.Users(ctx, 0, 0); err != nil || total != 2 {
		t.Fatalf("users total = %d, %v; want the 2 existing, none created", total, err)
	}
}

// A restarted server (or another replica) sees what was stored.
func survivesReopen(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t)
	createUsers(t, s, newUser("u1", "a@x.io", 0))
	if _, err := s.SetAdmin(ctx, "u1", true); err != nil {
		t.Fatal(err)
	}
	putTokens(t, s, &accounts.RefreshToken{Hash: "r1", UserID: "u1", Family: "f1", ExpiresAt: t0.Add(time.Hour)})
	createKeys(t, s, &accounts.APIKey{Hash: "k1", Prefix: "appk_1", UserID: "u1", CreatedAt: t0})
	if _, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "a@x.io", nil, accounts.LinkRule{EmailVerified: true, LinkAdmins: true}); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s)
	u, err := s.User(ctx, "u1")
	if err != nil || !u.IsAdmin {
		t.Fatalf("after reopen: %+v, %v; want an admin", u, err)
	}
	if live, err := s.RefreshFamilyLive(ctx, "f1"); err != nil || !live {
		t.Fatalf("refresh family after reopen: %v, %v", live, err)
	}
	if k, err := s.APIKeyByHash(ctx, "k1"); err != nil || k.UserID != "u1" {
		t.Fatalf("api key after reopen: %+v, %v", k, err)
	}
	got, err := s.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "idp", Subject: "s1"}, "else@x.io", nil, accounts.LinkRule{})
	if err != nil || got.ID != "u1" {
		t.Fatalf("auth link after reopen: %+v, %v", got, err)
	}
}
