package api_test

import (
	"regexp"
	"testing"
	"time"
)

var apiKeyShape = regexp.MustCompile(`^appk_[0-9a-f]{32}$`)

// keyItem finds a key in the caller's list by prefix.
func (f *authFixture) keyItem(token, prefix string) map[string]any {
	f.t.Helper()
	for _, k := range f.as(token, "GET", "/api/auth/api-keys", nil).expect(200).array() {
		if k["prefix"] == prefix {
			return k
		}
	}
	return nil
}

func TestAPIKeyLifecycle(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")

	created := f.as(access, "POST", "/api/auth/api-keys", map[string]any{"name": "ci", "expires_in_days": nil}).expect(200).object()
	assertKeys(t, "created key", created, "key", "name", "prefix", "expires_at", "scopes")
	key, prefix := created["key"].(string), created["prefix"].(string)
	if !apiKeyShape.MatchString(key) || len(key) != 37 || prefix != key[:8] || created["expires_at"] != nil || created["name"] != "ci" {
		t.Fatalf("created key = %v", created)
	}

	// The key works like its owner's access token.
	me := f.as(key, "GET", "/api/auth/me", nil).expect(200).object()
	if me["email"] != "ada@example.com" {
		t.Fatalf("me with the key = %v", me)
	}
	item := f.keyItem(access, prefix)
	assertKeys(t, "key item", item, "prefix", "name", "created_at", "expires_at", "last_used_at", "scopes")
	firstUse, _ := item["last_used_at"].(string)
	if firstUse == "" || item["name"] != "ci" {
		t.Fatalf("after a use: %v, want last_used_at set", item)
	}

	// Uses within a minute do not rewrite last_used_at; a later one does.
	f.clock.Advance(30 * time.Second)
	f.as(key, "GET", "/api/workspaces", nil).expect(200)
	if got := f.keyItem(access, prefix)["last_used_at"]; got != firstUse {
		t.Fatalf("last_used_at moved within a minute: %v -> %v", firstUse, got)
	}
	f.clock.Advance(time.Minute)
	f.as(key, "GET", "/api/workspaces", nil).expect(200)
	if got := f.keyItem(access, prefix)["last_used_at"]; got == firstUse {
		t.Fatalf("last_used_at not updated after a minute: %v", got)
	}

	// A key cannot mint keys, and the raw key is never listed.
	f.as(key, "POST", "/api/auth/api-keys", map[string]any{"name": "more"}).expectError(403, "access token")
	for _, k := range f.as(key, "GET", "/api/auth/api-keys", nil).expect(200).array() {
		if _, ok := k["key"]; ok {
			t.Fatalf("listing shows a raw key: %v", k)
		}
	}

	r := f.as(access, "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(200).object()
	if r["status"] != "revoked" {
		t.Fatalf("revoke answered %v", r)
	}
	f.as(key, "GET", "/api/auth/me", nil).expect(401)
	f.as(access, "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(404).errorMessage()
}

func TestAPIKeyExpires(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	created := f.as(access, "POST", "/api/auth/api-keys", map[string]any{"name": "short", "expires_in_days": 1}).expect(200).object()
	want := f.clock.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	if created["expires_at"] != want {
		t.Fatalf("expires_at = %v, want %s", created["expires_at"], want)
	}
	key := created["key"].(string)
	f.as(key, "GET", "/api/workspaces", nil).expect(200)
	f.clock.Advance(24 * time.Hour)
	f.as(key, "GET", "/api/workspaces", nil).expectError(401, "expired")
}

func TestAPIKeyRequestsAreValidated(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	tests := []struct {
		name string
		body any
		want string
	}{
		{"no body", nil, "name"},
		{"empty name", map[string]any{"name": ""}, "name"},
		{"blank name", map[string]any{"name": "   "}, "name"},
		{"zero days", map[string]any{"name": "k", "expires_in_days": 0}, "expires_in_days"},
		{"negative days", map[string]any{"name": "k", "expires_in_days": -3}, "expires_in_days"},
		{"days not a number", map[string]any{"name": "k", "expires_in_days": "7"}, "expires_in_days"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).as(access, "POST", "/api/auth/api-keys", tt.body).expectError(400, tt.want)
		})
	}
	f.api("POST", "/api/auth/api-keys", map[string]any{"name": "k"}).expect(401)
}

func TestOnlyTheOwnerRevokesAKey(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	f.addUser("bob@example.com", "pw", true)
	ada, _ := f.login("ada@example.com", "pw")
	bob, _ := f.login("bob@example.com", "pw")
	prefix := f.as(ada, "POST", "/api/auth/api-keys", map[string]any{"name": "mine"}).expect(200).object()["prefix"].(string)

	// Not even an admin sees or revokes someone else's key.
	if keys := f.as(bob, "GET", "/api/auth/api-keys", nil).expect(200).array(); len(keys) != 0 {
		t.Fatalf("bob sees keys %v", keys)
	}
	f.as(bob, "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(404).errorMessage()
	if f.keyItem(ada, prefix) == nil {
		t.Fatal("ada's key is gone after bob's attempt")
	}
	f.as(ada, "DELETE", "/api/auth/api-keys/"+prefix, nil).expect(200)
}
