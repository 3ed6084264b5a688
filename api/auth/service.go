// Package auth is the API's authentication: password and OIDC logins,
// access and refresh tokens, API keys, device cookies and login limits,
// the user and group admin endpoints, and the revocations open streams
// follow. It owns the UserStore port (the store implements it); api
// mounts it with Service.Routes and Service.RequireUser and asks Caller
// who a request is. It imports no handler package but api/httpx.
// It must not import api or api/dispatch (api imports it), store, app or
// runners.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
)

// Service is authentication when it is on: the /api/auth, /api/users and
// /api/groups endpoints (Routes), the middleware that requires a user
// (RequireUser, Caller), and the revocations open streams follow.
type Service struct {
	cfg   *Config
	users UserStore
	log   *slog.Logger
	oidc  *oidcFlows
	// guard rate-limits logins and token requests and bounds hashing.
	guard *loginGuard
	// devices issues and checks the device cookies the guard trusts.
	devices devices
	// revocations tells open streams at once when their user's
	// credentials or groups change.
	revocations *revocations

	// dummyHash is verified against when a login names no user, so an
	// unknown email takes as long as a wrong password.
	dummyOnce sync.Once
	dummyHash string
}

// New returns the authentication of cfg over the accounts in users.
func New(cfg *Config, users UserStore, log *slog.Logger) *Service {
	a := &Service{cfg: cfg, users: users, log: log, revocations: newRevocations()}
	a.oidc = newOIDCFlows(a)
	a.guard = newLoginGuard(cfg.Logins, a.now)
	a.devices = newDevices(cfg.JWTSecret)
	return a
}

func (a *Service) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// apiKeyTouchEvery bounds how often a key's last_used_at is written, so a
// busy script does not cost a database write per request.
const apiKeyTouchEvery = time.Minute

// Principal is the authenticated caller of a request.
type Principal struct {
	User *User
	// keyHash is the stored form of the API key the caller authenticated
	// with ("" for an access token).
	keyHash string
	// keyName is that key's name, for the audit trail.
	keyName string
	// family is the login (refresh token family) of an access token.
	family string
	// scopes are the API key's (none: every scope, and always for an
	// access token).
	scopes []accounts.Scope
}

// Scopes are what the caller's credential may do: an API key's scopes,
// nil (everything) for an access token or a key without scopes.
func (p *Principal) Scopes() []accounts.Scope { return p.scopes }

// Allows reports whether the caller's credential has scope s.
func (p *Principal) Allows(s accounts.Scope) bool { return accounts.Allows(p.scopes, s) }

// principalKey is where RequireUser leaves the principal in the echo context.
const principalKey = "appliance.principal"

// publicRoutes are auth's routes that need no token: how one gets one.
var publicRoutes = map[string]bool{
	"/api/auth/login":                   true,
	"/api/auth/refresh":                 true,
	"/api/auth/logout":                  true,
	"/api/auth/oidc/:provider":          true,
	"/api/auth/oidc/:provider/callback": true,
}

// Public reports whether route (an echo route path) is one of auth's that
// need no token: login, refresh, logout and the OIDC flow.
func Public(route string) bool { return publicRoutes[route] }

var (
	// ErrMissingToken is the 401 of a request that carries no token.
	ErrMissingToken = echo.NewHTTPError(http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
	errInvalidToken = echo.NewHTTPError(http.StatusUnauthorized, "invalid or expired token")
)

// RequireUser is the middleware of the routes that need a user: it
// resolves the request's bearer token (a JWT or an API key) to its
// principal, which Caller then returns, or answers 401. The routes in
// queryToken may carry the token as ?token= instead, since browsers cannot
// set headers on a WebSocket or an EventSource.
func (a *Service) RequireUser(queryToken ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token := httpx.BearerToken(c.Request())
			if token == "" && slices.Contains(queryToken, c.Path()) {
				token = c.QueryParam("token")
			}
			if token == "" {
				return ErrMissingToken
			}
			p, err := a.Authenticate(c.Request().Context(), token)
			if err != nil {
				return err
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// Authenticate resolves a token (a JWT or an API key) to its principal:
// 401 for anything that does not name a live user, a store failure as
// itself.
func (a *Service) Authenticate(ctx context.Context, token string) (*Principal, error) {
	p := &Principal{}
	if isAPIKey(token) {
		if len(token) != apiKeyLen {
			return nil, errInvalidToken
		}
		p.keyHash = apiKeyHash(token)
	} else {
		claims, err := a.parseAccessToken(token)
		if err != nil {
			return nil, errInvalidToken
		}
		// Every token this server issues names its login (sid), which a
		// logout or a reused refresh token revokes; one that names none
		// could never be revoked, so it is refused.
		if claims.Family == "" {
			return nil, errInvalidToken
		}
		p.User, p.family = &User{ID: claims.Subject}, claims.Family
	}
	p, key, err := a.resolve(ctx, p)
	switch {
	case errors.Is(err, endKeyExpired):
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "api key expired")
	case errors.As(err, new(*Revoked)):
		return nil, errInvalidToken
	case err != nil:
		return nil, err
	}
	if now := a.now(); key != nil && (key.LastUsedAt == nil || now.Sub(*key.LastUsedAt) >= apiKeyTouchEvery) {
		// A failed touch only loses a timestamp; the request goes on.
		if err := a.users.TouchAPIKey(ctx, key.Hash, now); err != nil {
			a.log.Warn("record api key use", "prefix", key.Prefix, "err", err)
		}
	}
	return p, nil
}

// Why a credential no longer stands: a request gets 401 for each, a
// stream ends with it.
var (
	endKeyRevoked  = credentialGone("the api key was revoked")
	endKeyExpired  = credentialGone("the api key expired")
	endLoginEnded  = credentialGone("the login ended: signed out, revoked, or the password changed; sign in again")
	endUserDeleted = credentialGone("the user was deleted")
)

// resolve loads the API key (returned) or checks the login p stands on,
// then its user. The access token's own signature and expiry are the
// caller's to check: a stream re-checks past them.
func (a *Service) resolve(ctx context.Context, p *Principal) (*Principal, *APIKey, error) {
	userID := ""
	var key *APIKey
	switch {
	case p.keyHash != "":
		k, err := a.users.APIKeyByHash(ctx, p.keyHash)
		if errors.Is(err, accounts.ErrAPIKeyNotFound) {
			return nil, nil, endKeyRevoked
		}
		if err != nil {
			return nil, nil, fmt.Errorf("load api key: %w", err)
		}
		if k.ExpiresAt != nil && !a.now().Before(*k.ExpiresAt) {
			return nil, nil, endKeyExpired
		}
		key, userID = k, k.UserID
	default:
		userID = p.User.ID
		if p.family != "" {
			// The token's login may have logged out or been revoked for
			// reuse of a refresh token since: then its access tokens die
			// with it.
			live, err := a.users.RefreshFamilyLive(ctx, p.family)
			if err != nil {
				return nil, nil, fmt.Errorf("look up login of token: %w", err)
			}
			if !live {
				return nil, nil, endLoginEnded
			}
		}
	}
	u, err := a.users.User(ctx, userID)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return nil, nil, endUserDeleted
	}
	if err != nil {
		return nil, nil, fmt.Errorf("load user: %w", err)
	}
	np := &Principal{User: u, keyHash: p.keyHash, family: p.family}
	if key != nil {
		np.scopes, np.keyName = key.Scopes, key.Name
	}
	return np, key, nil
}

// Caller returns the request's principal; nil when auth is off or the
// route needs no user.
func Caller(c echo.Context) *Principal {
	p, _ := c.Get(principalKey).(*Principal)
	return p
}

// SetCaller makes p the principal of c: a tool call of /mcp reaches the
// API's handlers through a context of its own, as the /mcp request's
// caller.
func SetCaller(c echo.Context, p *Principal) { c.Set(principalKey, p) }

// requireAdmin guards the admin endpoints (403 for other users).
func (a *Service) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := Caller(c)
		if p == nil {
			return ErrMissingToken
		}
		if !p.User.IsAdmin {
			return echo.NewHTTPError(http.StatusForbidden, "admin privileges required")
		}
		return next(c)
	}
}
