package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/app/config"
)

// Secrets long enough for validation.
const (
	testJWTSecret     = "jwt-secret-0123456789abcdef0123456789"
	testRefreshSecret = "refresh-secret-0123456789abcdef012345"
)

// withAuth turns auth on with an internal provider and an initial user.
func withAuth(c *config.Server) {
	c.Auth = &config.Auth{
		JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
		Providers:   map[string]config.AuthProvider{"local": {ProviderType: "internal"}},
		InitialUser: &config.InitialUser{Email: "admin@example.com", Password: "first-password"},
	}
}

func TestServerSeedsTheInitialUserAsAdminOnce(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  hi:\n    flow:\n      s: {type: script, script: echo hi}\n")
	r := startRestartable(t, map[string]string{"main": ws}, withAuth)
	var cfg map[string]any
	if code := do(t, "GET", r.url+"/api/config", nil, &cfg); code != 200 || cfg["auth_required"] != true || cfg["has_internal_auth"] != true {
		t.Fatalf("config: %d %v", code, cfg)
	}
	if code := do(t, "GET", r.url+"/api/workspaces", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("workspaces without a token: %d, want 401", code)
	}
	token := loginToken(t, r.url, "first-password")
	me := map[string]any{}
	if code := doAuth(t, "GET", r.url+"/api/auth/me", token, &me); code != 200 || me["is_admin"] != true || me["email"] != "admin@example.com" {
		t.Fatalf("me: %d %v, want the initial user as an admin", code, me)
	}

	// A restart with another configured password keeps the existing user.
	r.stop()
	r.cfg.Auth.InitialUser.Password = "second-password"
	r.start()
	loginToken(t, r.url, "first-password")
	var body map[string]any
	if code := do(t, "POST", r.url+"/api/auth/login", map[string]string{"email": "admin@example.com", "password": "second-password"}, &body); code != 401 {
		t.Fatalf("login with the new config password: %d, want 401", code)
	}
	var users map[string]any
	if code := doAuth(t, "GET", r.url+"/api/users", token, &users); code != 200 || users["total"] != float64(1) {
		t.Fatalf("users after restart: %d %v, want exactly one", code, users)
	}
}

func loginToken(t *testing.T, url, password string) string {
	t.Helper()
	var tokens wire.TokenPair
	if code := do(t, "POST", url+"/api/auth/login", wire.LoginRequest{Email: "admin@example.com", Password: password}, &tokens); code != 200 || tokens.AccessToken == "" {
		t.Fatalf("login: %d %v", code, tokens)
	}
	return tokens.AccessToken
}

func doAuth(t *testing.T, method, url, token string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: decode answer: %v", method, url, err)
	}
	return resp.StatusCode
}
