package auth

import (
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"time"

	"github.com/appliance-sh/appliance/accounts"
)

// Config turns authentication on (api.Config.Auth; nil = off). The app
// builds it from the `auth` section of server-config.yaml.
type Config struct {
	// JWTSecret signs access tokens (HS256).
	JWTSecret []byte
	// RefreshSecret keys the HMAC under which refresh tokens are stored, so
	// the database alone can neither check nor mint one.
	RefreshSecret []byte
	// BaseURL is the server's public URL; OIDC redirect URIs are built on it.
	BaseURL string
	// Providers by id: "internal" (email and password) or "oidc".
	Providers map[string]Provider
	// Now is the clock of token lifetimes and key expiry (nil = time.Now).
	Now func() time.Time
	// HTTPClient talks to OIDC providers (nil = http.DefaultClient).
	HTTPClient *http.Client
	// Logins bounds what password logins and token refreshes may cost.
	Logins LoginLimits
	// AccessTokenTTL is the lifetime of access tokens (0 = 15 minutes).
	AccessTokenTTL time.Duration
	// Audit takes the audit entries of failed sign-ins and sign-outs,
	// written with the next commit (nil: none recorded).
	Audit *audit.Queue
}

// LoginLimits keep a flood of logins from becoming an outage; a zero field
// takes its default.
type LoginLimits struct {
	// InFlight is how many password hashes (about 19 MiB each) are
	// computed at once (default: the CPU count). A login beyond waits up
	// to 5 s for a slot, then gets 503 with Retry-After.
	InFlight int
	// PerAccount bounds the failed logins of one account (default 10/m),
	// PerAddress the logins, and separately the refreshes and logouts, of
	// one client address (default 60/m). Beyond: 429 with Retry-After.
	PerAccount Rate
	PerAddress Rate
}

// Provider types of auth.providers.
const (
	ProviderInternal = "internal"
	ProviderOIDC     = "oidc"
)

// Provider is one entry of auth.providers.
type Provider struct {
	Type         string
	DisplayName  string
	IssuerURL    string
	ClientID     string
	ClientSecret string
	// LinkExisting lets an OIDC login be linked by (verified) email to an
	// admin's account; other accounts are linked without it.
	LinkExisting bool
}

// The account records and their store (the port auth owns; the store
// implements it), under their auth names.
type (
	User         = accounts.User
	AuthLink     = accounts.AuthLink
	RefreshToken = accounts.RefreshToken
	APIKey       = accounts.APIKey
	UserStore    = accounts.UserStore
)
