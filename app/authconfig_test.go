package app

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Secrets long enough for validation.
const (
	testJWTSecret     = "jwt-secret-0123456789abcdef0123456789"
	testRefreshSecret = "refresh-secret-0123456789abcdef012345"
)

func TestAuthConfigSection(t *testing.T) {
	secrets := "  jwt_secret: " + testJWTSecret + "\n  refresh_secret: " + testRefreshSecret + "\n"
	internal := "  providers:\n    local: {provider_type: internal}\n"
	cases := []struct {
		name, yaml, wantErr string
		check               func(*ServerConfig) bool
	}{
		{name: "no section is auth off", yaml: "listen: 127.0.0.1:1\n", check: func(c *ServerConfig) bool {
			return c.Auth == nil && c.Auth.apiConfig(defaultLimits()) == nil && c.Auth.describe() == "off"
		}},
		{name: "every key", yaml: "auth:\n" + secrets + `  base_url: https://appliance.example.com
  providers:
    local: {provider_type: internal}
    google:
      provider_type: oidc
      display_name: Google
      issuer_url: https://accounts.google.com
      client_id: id
      client_secret: secret
      link_existing: true
  initial_user: {email: admin@example.com, password: changeme}
`, check: func(c *ServerConfig) bool {
			a := c.Auth.apiConfig(defaultLimits())
			return a.BaseURL == "https://appliance.example.com" && a.Providers["google"].DisplayName == "Google" &&
				a.Providers["google"].LinkExisting && !a.Providers["local"].LinkExisting &&
				a.Providers["google"].ClientSecret == "secret" && a.Providers["local"].Type == "internal" &&
				string(a.JWTSecret) == testJWTSecret && c.Auth.InitialUser.Email == "admin@example.com" &&
				c.Auth.describe() == "on, providers google (oidc), local (internal)"
		}},
		{name: "jwt secret missing", yaml: "auth:\n  refresh_secret: " + testRefreshSecret + "\n" + internal, wantErr: "auth.jwt_secret: required"},
		{name: "refresh secret missing", yaml: "auth:\n  jwt_secret: " + testJWTSecret + "\n" + internal, wantErr: "auth.refresh_secret: required"},
		{name: "short secret", yaml: "auth:\n  jwt_secret: short\n  refresh_secret: " + testRefreshSecret + "\n" + internal, wantErr: "auth.jwt_secret: too short"},
		{name: "empty section", yaml: "auth: {}\n", wantErr: "auth.jwt_secret: required"},
		{name: "no providers", yaml: "auth:\n" + secrets, wantErr: "auth.providers: at least one"},
		{name: "unknown provider type", yaml: "auth:\n" + secrets + "  providers:\n    x: {provider_type: saml}\n", wantErr: `auth.providers.x.provider_type: unknown type "saml"`},
		{name: "provider type missing", yaml: "auth:\n" + secrets + "  providers:\n    x: {display_name: X}\n", wantErr: "auth.providers.x.provider_type: required"},
		{name: "bad provider id", yaml: "auth:\n" + secrets + "  providers:\n    a/b: {provider_type: internal}\n", wantErr: "auth.providers.a/b: provider id"},
		{name: "oidc without base_url", yaml: "auth:\n" + secrets + "  providers:\n    g: {provider_type: oidc, issuer_url: https://i, client_id: c, client_secret: s}\n", wantErr: "auth.base_url: required"},
		{name: "oidc without issuer", yaml: "auth:\n" + secrets + "  base_url: http://x\n  providers:\n    g: {provider_type: oidc, client_id: c, client_secret: s}\n", wantErr: "auth.providers.g.issuer_url: required"},
		{name: "oidc without client secret", yaml: "auth:\n" + secrets + "  base_url: http://x\n  providers:\n    g: {provider_type: oidc, issuer_url: https://i, client_id: c}\n", wantErr: "auth.providers.g.client_secret: required"},
		{name: "link_existing on an internal provider", yaml: "auth:\n" + secrets + "  providers:\n    local: {provider_type: internal, link_existing: true}\n", wantErr: "auth.providers.local.link_existing: only for an oidc provider"},
		{name: "base_url not a URL", yaml: "auth:\n" + secrets + "  base_url: appliance.local\n  providers:\n    g: {provider_type: oidc, issuer_url: https://i, client_id: c, client_secret: s}\n", wantErr: `auth.base_url: "appliance.local" is not an http(s) URL`},
		{name: "initial user without internal provider", yaml: "auth:\n" + secrets + "  base_url: http://x\n  providers:\n    g: {provider_type: oidc, issuer_url: https://i, client_id: c, client_secret: s}\n  initial_user: {email: a@b.c, password: p}\n", wantErr: "auth.initial_user: needs a provider with provider_type internal"},
		{name: "initial user without password", yaml: "auth:\n" + secrets + internal + "  initial_user: {email: a@b.c}\n", wantErr: "auth.initial_user.password: required"},
		{name: "access token ttl", yaml: "auth:\n" + secrets + internal + "  access_token_ttl: 2m\n", check: func(c *ServerConfig) bool {
			return c.Auth.apiConfig(defaultLimits()).AccessTokenTTL == 2*time.Minute
		}},
		{name: "access token ttl too short", yaml: "auth:\n" + secrets + internal + "  access_token_ttl: 10ms\n", wantErr: `auth.access_token_ttl: "10ms" is not a duration between 1s and 24h`},
		{name: "unknown auth key", yaml: "auth:\n" + secrets + internal + "  jwt_ttl: 5m\n", wantErr: "jwt_ttl"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfigText(t, c.yaml)
			if configErrorChecked(t, err, c.wantErr) {
				return
			}
			if !c.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// withAuth turns auth on with an internal provider and an initial user.
func withAuth(c *ServerConfig) {
	c.Auth = &AuthConfig{
		JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
		Providers:   map[string]AuthProviderConfig{"local": {ProviderType: "internal"}},
		InitialUser: &InitialUserConfig{Email: "admin@example.com", Password: "first-password"},
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

func TestSettingsSayWhetherAuthIsOn(t *testing.T) {
	for _, tc := range []struct {
		auth func(*ServerConfig)
		want string
	}{
		{func(*ServerConfig) {}, "auth:                  off"},
		{withAuth, "auth:                  on, providers local (internal)"},
	} {
		cfg, err := loadServerConfig("")
		if err != nil {
			t.Fatal(err)
		}
		tc.auth(cfg)
		var out bytes.Buffer
		printSettings(&out, cfg, "127.0.0.1:1", nil)
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("settings:\n%s\nwant a line %q", out.String(), tc.want)
		}
	}
}

func loginToken(t *testing.T, url, password string) string {
	t.Helper()
	var tokens map[string]string
	if code := do(t, "POST", url+"/api/auth/login", map[string]string{"email": "admin@example.com", "password": password}, &tokens); code != 200 || tokens["access_token"] == "" {
		t.Fatalf("login: %d %v", code, tokens)
	}
	return tokens["access_token"]
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
