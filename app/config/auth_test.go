package config

import (
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
		check               func(*Server) bool
	}{
		{name: "no section is auth off", yaml: "listen: 127.0.0.1:1\n", check: func(c *Server) bool {
			return c.Auth == nil && c.Auth.APIConfig(DefaultLimits()) == nil && c.Auth.Describe() == "off"
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
`, check: func(c *Server) bool {
			a := c.Auth.APIConfig(DefaultLimits())
			return a.BaseURL == "https://appliance.example.com" && a.Providers["google"].DisplayName == "Google" &&
				a.Providers["google"].LinkExisting && !a.Providers["local"].LinkExisting &&
				a.Providers["google"].ClientSecret == "secret" && a.Providers["local"].Type == "internal" &&
				string(a.JWTSecret) == testJWTSecret && c.Auth.InitialUser.Email == "admin@example.com" &&
				c.Auth.Describe() == "on, providers google (oidc), local (internal)"
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
		{name: "access token ttl", yaml: "auth:\n" + secrets + internal + "  access_token_ttl: 2m\n", check: func(c *Server) bool {
			return c.Auth.APIConfig(DefaultLimits()).AccessTokenTTL == 2*time.Minute
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
