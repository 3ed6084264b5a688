package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

func newUser(id, email string, i int) *accounts.User {
	return &accounts.User{ID: id, Email: email, Groups: []string{}, CreatedAt: t0.Add(time.Duration(i) * time.Second)}
}

func TestUserEmailIsUniqueInAnyLetterCase(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	if err := db.CreateUser(ctx, newUser("u1", "Ada@Example.com", 0)); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if err := db.CreateUser(ctx, newUser("u2", "ada@example.COM", 1)); !errors.Is(err, accounts.ErrEmailTaken) {
		t.Fatalf("duplicate email: got %v, want ErrConflict", err)
	}
	u, err := db.UserByEmail(ctx, "ADA@example.com")
	if err != nil || u.ID != "u1" || u.Email != "Ada@Example.com" {
		t.Fatalf("UserByEmail = %+v, %v; want u1 with its email as given", u, err)
	}
	if _, err := db.User(ctx, "nobody"); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("User(nobody): got %v, want ErrNotFound", err)
	}
}

func TestUsersPageInCreationOrderWithTotal(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	for i, id := range []string{"c", "a", "b"} {
		if err := db.CreateUser(ctx, newUser(id, id+"@x.io", i)); err != nil {
			t.Fatal(err)
		}
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
		users, total, err := db.Users(ctx, tt.limit, tt.offset)
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
}

func TestGroupsListsNamesInUseAndForgetsEmptyOnes(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	for i, id := range []string{"u1", "u2"} {
		if err := db.CreateUser(ctx, newUser(id, id+"@x.io", i)); err != nil {
			t.Fatal(err)
		}
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
	}
	for i, s := range steps {
		u, err := db.SetGroups(ctx, s.user, s.groups)
		if err != nil {
			t.Fatalf("step %d: SetGroups: %v", i, err)
		}
		if len(s.groups) > 0 && u.Groups[0] > u.Groups[len(u.Groups)-1] {
			t.Errorf("step %d: groups %v are not sorted", i, u.Groups)
		}
		got, err := db.Groups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d: Groups = %v, want %v", i, got, s.want)
		}
	}
	if _, err := db.SetGroups(ctx, "ghost", []string{"x"}); !errors.Is(err, accounts.ErrUserNotFound) {
		t.Fatalf("SetGroups(ghost): got %v, want ErrNotFound", err)
	}
}

func TestSetAdminPersistsAcrossReopen(t *testing.T) {
	db, path := openTemp(t)
	ctx := context.Background()
	if err := db.CreateUser(ctx, newUser("u1", "a@x.io", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetAdmin(ctx, "u1", true); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	u, err := db2.User(ctx, "u1")
	if err != nil || !u.IsAdmin {
		t.Fatalf("after reopen: %+v, %v; want an admin", u, err)
	}
}

func TestProvisionLinkedUserFollowsTheThreeRules(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	existing := newUser("u-existing", "known@x.io", 0)
	existing.PasswordHash = "$argon2id$..."
	if err := db.CreateUser(ctx, existing); err != nil {
		t.Fatal(err)
	}
	link := func(provider, subject string) accounts.AuthLink {
		return accounts.AuthLink{Provider: provider, Subject: subject, CreatedAt: t0}
	}
	tests := []struct {
		name       string
		link       accounts.AuthLink
		email      string
		newID      string
		wantID     string
		wantOIDC   []string
		wantLinked bool
	}{
		{"a new email creates a user", link("google", "g-1"), "new@x.io", "u-new", "u-new", []string{"google"}, true},
		{"an existing email is linked", link("google", "g-2"), "KNOWN@x.io", "u-unused", "u-existing", []string{"google"}, true},
		{"a link wins over the email", link("google", "g-2"), "new@x.io", "u-unused2", "u-existing", []string{"google"}, true},
		{"a second provider adds a method", link("okta", "o-1"), "known@x.io", "u-unused3", "u-existing", []string{"google", "okta"}, true},
	}
	for _, tt := range tests {
		u, err := db.ProvisionLinkedUser(ctx, tt.link, tt.email, newUser(tt.newID, tt.email, 1), accounts.LinkRule{EmailVerified: true})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if u.ID != tt.wantID || !reflect.DeepEqual(u.OIDCProviders, tt.wantOIDC) {
			t.Errorf("%s: got user %s with providers %v; want %s with %v", tt.name, u.ID, u.OIDCProviders, tt.wantID, tt.wantOIDC)
		}
		stored, err := db.User(ctx, u.ID)
		if err != nil || !reflect.DeepEqual(stored.OIDCProviders, tt.wantOIDC) {
			t.Errorf("%s: stored user %+v, %v", tt.name, stored, err)
		}
	}
	_, total, err := db.Users(ctx, 0, 0)
	if err != nil || total != 2 {
		t.Fatalf("users total = %d, %v; want 2 (existing and new)", total, err)
	}
}

func TestProvisionLinkedUserLinksOnlyWhatTheRuleAllows(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	admin := newUser("u-admin", "root@x.io", 0)
	admin.IsAdmin = true
	for _, u := range []*accounts.User{admin, newUser("u-plain", "plain@x.io", 1)} {
		if err := db.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
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
		u, err := db.ProvisionLinkedUser(ctx, link(tt.subject), tt.email, newUser("u-new-"+tt.subject, tt.email, 2), tt.rule)
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
	if _, total, err := db.Users(ctx, 0, 0); err != nil || total != 2 {
		t.Fatalf("users total = %d, %v; want the 2 existing, none created", total, err)
	}
}

func TestConcurrentFirstLoginsCreateOneUser(t *testing.T) {
	db, _ := openTemp(t)
	ctx := context.Background()
	errs := make(chan error, 8)
	ids := make(chan string, 8)
	for i := range 8 {
		go func() {
			u, err := db.ProvisionLinkedUser(ctx, accounts.AuthLink{Provider: "google", Subject: "same"}, "same@x.io", newUser(fmt.Sprintf("u%d", i), "same@x.io", i), accounts.LinkRule{EmailVerified: true})
			errs <- err
			if u != nil {
				ids <- u.ID
			}
		}()
	}
	first := ""
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("ProvisionLinkedUser: %v", err)
		}
		id := <-ids
		if first == "" {
			first = id
		}
		if id != first {
			t.Fatalf("two users for one identity: %s and %s", first, id)
		}
	}
}
