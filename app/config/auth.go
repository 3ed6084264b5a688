package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
)

// Auth is the `auth` section of server-config.yaml; without it auth
// is off.
type Auth struct {
	JWTSecret     string                  `yaml:"jwt_secret"`
	RefreshSecret string                  `yaml:"refresh_secret"`
	BaseURL       string                  `yaml:"base_url"`
	Providers     map[string]AuthProvider `yaml:"providers"`
	// InitialUser is created at start-up, as an admin, when no user has
	// its email; an existing user is left as it is (password included).
	InitialUser *InitialUser `yaml:"initial_user"`
	// AccessTokenTTL is the lifetime of access tokens (default 15m).
	AccessTokenTTL string `yaml:"access_token_ttl"`
}

// AuthProvider is one entry of auth.providers.
type AuthProvider struct {
	ProviderType string `yaml:"provider_type"` // internal | oidc
	DisplayName  string `yaml:"display_name"`
	IssuerURL    string `yaml:"issuer_url"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// LinkExisting lets a login at this provider be linked by email to an
	// admin's account (off: an address at the provider cannot become an
	// admin here).
	LinkExisting bool `yaml:"link_existing"`
}

// InitialUser is auth.initial_user.
type InitialUser struct {
	Email    string `yaml:"email"`
	Password string `yaml:"password"`
}

// minSecretLen is the shortest accepted secret: HS256 wants a key of at
// least its 256-bit output.
const minSecretLen = 32

// providerID keeps provider ids usable in URL paths and in "oidc:<id>".
var providerID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validate checks the section; a nil section (auth off) is valid.
func (a *Auth) validate() error {
	if a == nil {
		return nil
	}
	for _, s := range []struct{ field, value string }{{"jwt_secret", a.JWTSecret}, {"refresh_secret", a.RefreshSecret}} {
		if s.value == "" {
			return fmt.Errorf("auth.%s: required when auth is configured (generate one with: openssl rand -hex 32)", s.field)
		}
		if len(s.value) < minSecretLen {
			return fmt.Errorf("auth.%s: too short (%d characters, at least %d; generate one with: openssl rand -hex 32)", s.field, len(s.value), minSecretLen)
		}
	}
	if _, err := a.TokenTTL(); err != nil {
		return err
	}
	if len(a.Providers) == 0 {
		return errors.New("auth.providers: at least one provider is required (for example internal: {provider_type: internal})")
	}
	hasOIDC, hasInternal := false, false
	for _, id := range a.ProviderIDs() {
		p := a.Providers[id]
		field := "auth.providers." + id
		if !providerID.MatchString(id) {
			return fmt.Errorf("%s: provider id must be 1 to 64 letters, digits, _ or -", field)
		}
		switch p.ProviderType {
		case auth.ProviderInternal:
			hasInternal = true
			if p.LinkExisting {
				return fmt.Errorf("%s.link_existing: only for an oidc provider", field)
			}
		case auth.ProviderOIDC:
			hasOIDC = true
			if err := httpURL(field+".issuer_url", p.IssuerURL); err != nil {
				return err
			}
			if p.ClientID == "" {
				return fmt.Errorf("%s.client_id: required for an oidc provider", field)
			}
			if p.ClientSecret == "" {
				return fmt.Errorf("%s.client_secret: required for an oidc provider", field)
			}
		case "":
			return fmt.Errorf("%s.provider_type: required (internal or oidc)", field)
		default:
			return fmt.Errorf("%s.provider_type: unknown type %q (internal or oidc)", field, p.ProviderType)
		}
	}
	if hasOIDC {
		if err := httpURL("auth.base_url", a.BaseURL); err != nil {
			return fmt.Errorf("%w (the public URL of this server, needed for oidc redirect URIs)", err)
		}
	}
	if u := a.InitialUser; u != nil {
		if !strings.Contains(u.Email, "@") {
			return fmt.Errorf("auth.initial_user.email: %q is not an email address", u.Email)
		}
		if u.Password == "" {
			return errors.New("auth.initial_user.password: required")
		}
		if !hasInternal {
			return errors.New("auth.initial_user: needs a provider with provider_type internal to log in with")
		}
	}
	return nil
}

// TokenTTL is auth.access_token_ttl: at least a second, at most a
// day (0 when unset: the API's default).
func (a *Auth) TokenTTL() (time.Duration, error) {
	if a.AccessTokenTTL == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(a.AccessTokenTTL)
	if err != nil || d < time.Second || d > 24*time.Hour {
		return 0, fmt.Errorf("auth.access_token_ttl: %q is not a duration between 1s and 24h (like 15m)", a.AccessTokenTTL)
	}
	return d, nil
}

func httpURL(field, raw string) error {
	if raw == "" {
		return fmt.Errorf("%s: required", field)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s: %q is not an http(s) URL", field, raw)
	}
	return nil
}

func (a *Auth) ProviderIDs() []string {
	ids := make([]string, 0, len(a.Providers))
	for id := range a.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// APIConfig is what the API needs of the section, with the login limits;
// nil when auth is off.
func (a *Auth) APIConfig(limits Limits) *auth.Config {
	if a == nil {
		return nil
	}
	out := &auth.Config{
		JWTSecret:     []byte(a.JWTSecret),
		RefreshSecret: []byte(a.RefreshSecret),
		BaseURL:       a.BaseURL,
		Providers:     map[string]auth.Provider{},
		Logins: auth.LoginLimits{
			InFlight:   limits.LoginsInFlight,
			PerAccount: auth.Rate(limits.LoginRate),
			PerAddress: auth.Rate(limits.LoginRateAddress),
		},
	}
	// validate has refused a bad value.
	out.AccessTokenTTL, _ = a.TokenTTL()
	for id, p := range a.Providers {
		out.Providers[id] = auth.Provider{
			Type: p.ProviderType, DisplayName: p.DisplayName,
			IssuerURL: p.IssuerURL, ClientID: p.ClientID, ClientSecret: p.ClientSecret,
			LinkExisting: p.LinkExisting,
		}
	}
	return out
}

// Describe is the start-up line of the section.
func (a *Auth) Describe() string {
	if a == nil {
		return "off"
	}
	parts := make([]string, 0, len(a.Providers))
	for _, id := range a.ProviderIDs() {
		parts = append(parts, id+" ("+a.Providers[id].ProviderType+")")
	}
	return "on, providers " + strings.Join(parts, ", ")
}
