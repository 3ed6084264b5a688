package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestAdminEndpointsRefuseOtherUsers(t *testing.T) {
	f := newAuthFixture(t, nil)
	bobID := f.addUser("bob@example.com", "pw", false)
	bob, _ := f.login("bob@example.com", "pw")
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/api/users", nil},
		{"GET", "/api/users/" + bobID, nil},
		{"PUT", "/api/users/" + bobID + "/admin", map[string]any{"is_admin": true}},
		{"PUT", "/api/users/" + bobID + "/groups", map[string]any{"groups": []string{"ops"}}},
		{"GET", "/api/groups", nil},
	} {
		f.as(bob, r.method, r.path, r.body).expectError(403, "admin")
		f.api(r.method, r.path, r.body).expect(401)
	}
	// Bob did not promote himself on the way.
	if me := f.as(bob, "GET", "/api/auth/me", nil).expect(200).object(); me["is_admin"] != false {
		t.Fatalf("bob is admin: %v", me)
	}
}

func TestAdminListsAndInspectsUsers(t *testing.T) {
	f := newAuthFixture(t, nil)
	// Users list in creation order; a second apart, the order is exact.
	adminID := f.addUser("admin@example.com", "pw", true)
	for i := range 22 {
		f.clock.Advance(time.Second)
		f.addUser(fmt.Sprintf("user%02d@example.com", i), "pw", false)
	}
	admin, _ := f.login("admin@example.com", "pw")

	page := f.as(admin, "GET", "/api/users", nil).expect(200).object()
	items := page["items"].([]any)
	if len(items) != 20 || page["total"] != float64(23) {
		t.Fatalf("default page: %d items, total %v; want 20 of 23", len(items), page["total"])
	}
	first := items[0].(map[string]any)
	for _, k := range []string{"id", "email", "is_admin", "groups", "auth_methods"} {
		if _, ok := first[k]; !ok {
			t.Fatalf("user item lacks %s: %v", k, first)
		}
	}
	if first["id"] != adminID || first["is_admin"] != true || fmt.Sprint(first["auth_methods"]) != "[internal]" {
		t.Fatalf("first user = %v, want the admin with auth_methods [internal]", first)
	}
	rest := f.as(admin, "GET", "/api/users?limit=5&offset=20", nil).expect(200).object()["items"].([]any)
	if len(rest) != 3 || rest[2].(map[string]any)["email"] != "user21@example.com" {
		t.Fatalf("last page = %v", rest)
	}
	f.as(admin, "GET", "/api/users?limit=0", nil).expectError(400, "limit")

	detail := f.as(admin, "GET", "/api/users/"+adminID, nil).expect(200).object()
	if detail["email"] != "admin@example.com" {
		t.Fatalf("detail = %v", detail)
	}
	f.as(admin, "GET", "/api/users/0191c1a0-0000-7000-8000-000000000000", nil).expectError(404, "user")
	f.as(admin, "GET", "/api/users/not-a-uuid", nil).expectError(404, "user")
}

func TestAdminStatusChangesButNeverForOneself(t *testing.T) {
	f := newAuthFixture(t, nil)
	adminID := f.addUser("admin@example.com", "pw", true)
	bobID := f.addUser("bob@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	bob, _ := f.login("bob@example.com", "pw")

	f.as(admin, "PUT", "/api/users/"+adminID+"/admin", map[string]any{"is_admin": false}).expectError(400, "your own admin")
	// Re-granting oneself is a no-op, not an error.
	f.as(admin, "PUT", "/api/users/"+adminID+"/admin", map[string]any{"is_admin": true}).expect(200)

	r := f.as(admin, "PUT", "/api/users/"+bobID+"/admin", map[string]any{"is_admin": true}).expect(200).object()
	if r["is_admin"] != true {
		t.Fatalf("grant answered %v", r)
	}
	// Bob's existing token now reaches admin endpoints: the stored flag counts.
	f.as(bob, "GET", "/api/groups", nil).expect(200)
	f.as(bob, "PUT", "/api/users/"+adminID+"/admin", map[string]any{"is_admin": false}).expect(200)
	f.as(admin, "GET", "/api/users", nil).expect(403)

	f.as(bob, "PUT", "/api/users/"+adminID+"/admin", map[string]any{}).expectError(400, "is_admin")
	f.as(bob, "PUT", "/api/users/0191c1a0-0000-7000-8000-000000000000/admin", map[string]any{"is_admin": true}).expect(404)
}

func TestGroupNamesAreValidated(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("admin@example.com", "pw", true)
	bobID := f.addUser("bob@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	path := "/api/users/" + bobID + "/groups"

	tests := []struct {
		name   string
		groups any
		status int
	}{
		{"letters digits dash underscore", []string{"Ops_team-1"}, 200},
		{"64 characters", []string{strings.Repeat("a", 64)}, 200},
		{"empty list", []string{}, 200},
		{"empty name", []string{""}, 400},
		{"65 characters", []string{strings.Repeat("a", 65)}, 400},
		{"space", []string{"ops team"}, 400},
		{"dot", []string{"ops.team"}, 400},
		{"non-ascii letter", []string{"équipe"}, 400},
		{"one bad among good", []string{"ok", "bad/name"}, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.in(t).as(admin, "PUT", path, map[string]any{"groups": tt.groups})
			if tt.status == 400 {
				r.expectError(400, "group name")
				return
			}
			r.expect(tt.status)
		})
	}
	f.as(admin, "PUT", path, map[string]any{}).expectError(400, "groups")
}

func TestGroupsListsEveryGroupInUse(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("admin@example.com", "pw", true)
	a := f.addUser("a@example.com", "pw", false)
	b := f.addUser("b@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	r := f.as(admin, "PUT", "/api/users/"+a+"/groups", map[string]any{"groups": []string{"ops", "dev", "ops"}}).expect(200).object()
	if fmt.Sprint(r["groups"]) != "[dev ops]" {
		t.Fatalf("set groups answered %v, want [dev ops]", r)
	}
	f.as(admin, "PUT", "/api/users/"+b+"/groups", map[string]any{"groups": []string{"qa"}}).expect(200)
	got := f.as(admin, "GET", "/api/groups", nil).expect(200).object()
	assertKeys(t, "groups", got, "groups")
	if fmt.Sprint(got["groups"]) != "[dev ops qa]" {
		t.Fatalf("groups = %v", got["groups"])
	}
	if u := f.as(admin, "GET", "/api/users/"+a, nil).expect(200).object(); fmt.Sprint(u["groups"]) != "[dev ops]" {
		t.Fatalf("user groups = %v", u["groups"])
	}
}
