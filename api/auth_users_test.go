package api_test

import (
	"fmt"
	"sync"
	"testing"
)

func TestAdminCreatesUserWhoCanLogIn(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("admin@example.com", "pw", true)
	admin, _ := f.login("admin@example.com", "pw")

	u := f.as(admin, "POST", "/api/users", map[string]any{
		"email": "ada@example.com", "name": "Ada", "password": "correct horse battery",
		"is_admin": false, "groups": []string{"ops", "dev", "ops"},
	}).expect(201).object()
	if u["email"] != "ada@example.com" || u["name"] != "Ada" || u["is_admin"] != false ||
		fmt.Sprint(u["groups"]) != "[dev ops]" || fmt.Sprint(u["auth_methods"]) != "[internal]" {
		t.Fatalf("created user = %v", u)
	}
	f.login("ada@example.com", "correct horse battery")
	got := f.as(admin, "GET", "/api/users/"+u["id"].(string), nil).expect(200).object()
	if got["email"] != "ada@example.com" {
		t.Fatalf("GET user = %v", got)
	}

	for _, tt := range []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"email taken in another case", map[string]any{"email": "ADA@example.com", "password": "another long pw"}, 409, "already exists"},
		{"bad email", map[string]any{"email": "not-an-email", "password": "another long pw"}, 400, "not an email address"},
		{"display name in email", map[string]any{"email": "Ada <x@example.com>", "password": "another long pw"}, 400, "not an email address"},
		{"no email", map[string]any{"password": "another long pw"}, 400, `"email" is required`},
		{"short password", map[string]any{"email": "bo@example.com", "password": "elevenchars"}, 400, "too short: 11 characters, at least 12"},
		{"bad group", map[string]any{"email": "bo@example.com", "password": "another long pw", "groups": []string{"ops", "no spaces"}}, 400, `invalid group name "no spaces"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).as(admin, "POST", "/api/users", tt.body).expectError(tt.status, tt.msg)
		})
	}
	if total := f.as(admin, "GET", "/api/users", nil).expect(200).object()["total"]; total != float64(2) {
		t.Fatalf("total users %v after refused creations, want 2", total)
	}
}

func TestDeleteUserRevokesTheirTokensAndKeys(t *testing.T) {
	f := newAuthFixture(t, nil)
	adminID := f.addUser("admin@example.com", "pw", true)
	bobID := f.addUser("bob@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	bobAccess, bobRefresh := f.login("bob@example.com", "pw")
	key := f.as(bobAccess, "POST", "/api/auth/api-keys", map[string]any{"name": "ci"}).expect(200).object()["key"].(string)
	f.as(key, "GET", "/api/auth/me", nil).expect(200)

	f.as(admin, "DELETE", "/api/users/"+adminID, nil).expectError(400, "cannot delete your own account")
	f.as(bobAccess, "DELETE", "/api/users/"+adminID, nil).expectError(403, "admin")
	if r := f.as(admin, "DELETE", "/api/users/"+bobID, nil).expect(200).object(); r["status"] != "deleted" {
		t.Fatalf("delete answered %v", r)
	}
	f.as(bobAccess, "GET", "/api/auth/me", nil).expect(401)
	f.as(key, "GET", "/api/auth/me", nil).expect(401)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": bobRefresh}).expect(401)
	f.as(admin, "GET", "/api/users/"+bobID, nil).expect(404)
	f.as(admin, "DELETE", "/api/users/"+bobID, nil).expect(404)
	// The email is free again.
	f.as(admin, "POST", "/api/users", map[string]any{"email": "bob@example.com", "password": "a new long password"}).expect(201)
}

func TestAdminSetsPasswordAndEndsTheUsersLogins(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("admin@example.com", "pw", true)
	bobID := f.addUser("bob@example.com", "pw", false)
	admin, _ := f.login("admin@example.com", "pw")
	bobAccess, bobRefresh := f.login("bob@example.com", "pw")

	f.as(admin, "PUT", "/api/users/"+bobID+"/password", map[string]any{"password": "short"}).expectError(400, "too short")
	f.as(bobAccess, "PUT", "/api/users/"+bobID+"/password", map[string]any{"password": "bob wants this one"}).expect(403)
	f.as(admin, "PUT", "/api/users/"+bobID+"/password", map[string]any{"password": "a fresh password"}).expect(200)
	f.as(bobAccess, "GET", "/api/auth/me", nil).expect(401)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": bobRefresh}).expect(401)
	f.api("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": "pw"}).expect(401)
	f.login("bob@example.com", "a fresh password")
}

func TestChangeOwnPasswordKeepsThisLoginAndEndsTheOthers(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("bob@example.com", "old password!", false)
	here, hereRefresh := f.login("bob@example.com", "old password!")
	there, thereRefresh := f.login("bob@example.com", "old password!")

	f.as(here, "PUT", "/api/auth/me/password", map[string]any{"current_password": "wrong", "password": "brand new password"}).
		expectError(400, "current_password is wrong")
	f.as(here, "PUT", "/api/auth/me/password", map[string]any{"password": "brand new password"}).expectError(400, "current_password")
	f.as(here, "PUT", "/api/auth/me/password", map[string]any{"current_password": "old password!", "password": "tiny"}).expectError(400, "too short")
	f.as(here, "PUT", "/api/auth/me/password", map[string]any{"current_password": "old password!", "password": "brand new password"}).expect(200)

	f.as(here, "GET", "/api/auth/me", nil).expect(200)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": hereRefresh}).expect(200)
	f.as(there, "GET", "/api/auth/me", nil).expect(401)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": thereRefresh}).expect(401)
	f.api("POST", "/api/auth/login", map[string]string{"email": "bob@example.com", "password": "old password!"}).expect(401)
	f.login("bob@example.com", "brand new password")
}

// Two admins revoke each other's admin status at the same moment: one
// wins, the other is told 409, and the server keeps one admin.
func TestConcurrentMutualDemotionOverHTTPKeepsAnAdmin(t *testing.T) {
	f := newAuthFixture(t, nil)
	for round := range 5 {
		a := fmt.Sprintf("a%d@example.com", round)
		b := fmt.Sprintf("b%d@example.com", round)
		aID, bID := f.addUser(a, "pw", true), f.addUser(b, "pw", true)
		aTok, _ := f.login(a, "pw")
		bTok, _ := f.login(b, "pw")
		// Leave only this round's pair as admins.
		users := f.as(aTok, "GET", "/api/users?limit=100", nil).expect(200).object()["items"].([]any)
		for _, it := range users {
			u := it.(map[string]any)
			if u["is_admin"] == true && u["id"] != aID && u["id"] != bID {
				f.as(aTok, "PUT", "/api/users/"+u["id"].(string)+"/admin", map[string]any{"is_admin": false}).expect(200)
			}
		}
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, call := range []struct{ tok, target string }{{aTok, bID}, {bTok, aID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = f.as(call.tok, "PUT", "/api/users/"+call.target+"/admin", map[string]any{"is_admin": false}).status
			}()
		}
		close(start)
		wg.Wait()
		got := fmt.Sprint(statuses)
		// 200 then 409 (last admin), or 200 then 403 when the loser's
		// request was authorised after the winner's commit.
		if got != "[200 409]" && got != "[409 200]" && got != "[200 403]" && got != "[403 200]" {
			t.Fatalf("round %d: statuses %s, want one 200 and one refusal", round, got)
		}
		admins := 0
		for _, tok := range []string{aTok, bTok} {
			if me := f.as(tok, "GET", "/api/auth/me", nil).expect(200).object(); me["is_admin"] == true {
				admins++
			}
		}
		if admins != 1 {
			t.Fatalf("round %d: %d of the two are admins, want 1", round, admins)
		}
	}
}
