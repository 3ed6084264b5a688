package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
)

// authService is the state of authentication when it is on.
type authService struct {
	cfg   *AuthConfig
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

func newAuthService(cfg *AuthConfig, users UserStore, log *slog.Logger) *authService {
	a := &authService{cfg: cfg, users: users, log: log, revocations: newRevocations()}
	a.oidc = newOIDCFlows(a)
	a.guard = newLoginGuard(cfg.Logins, a.now)
	a.devices = newDevices(cfg.JWTSecret)
	return a
}

func (a *authService) now() time.Time {
	if a.cfg.Now != nil {
		return a.cfg.Now()
	}
	return time.Now()
}

// apiKeyTouchEvery bounds how often a key's last_used_at is written, so a
// busy script does not cost a database write per request.
const apiKeyTouchEvery = time.Minute

// principal is the authenticated caller of a request.
type principal struct {
	user *User
	// keyHash is the stored form of the API key the caller authenticated
	// with ("" for an access token).
	keyHash string
	// family is the login (refresh token family) of an access token.
	family string
}

// principalKey is where authenticate leaves the principal in the echo context.
const principalKey = "appliance.principal"

// publicRoutes are the /api routes that need no token even with auth on.
var publicRoutes = map[string]bool{
	"/api/config":                       true,
	"/api/openapi.json":                 true,
	"/api/auth/login":                   true,
	"/api/auth/refresh":                 true,
	"/api/auth/logout":                  true,
	"/api/auth/oidc/:provider":          true,
	"/api/auth/oidc/:provider/callback": true,
}

// streamRoute (and eventsRoute) may carry its token as ?token=, since
// browsers cannot set headers on a WebSocket or an EventSource.
const streamRoute = "/api/jobs/:id/logs/stream"

var (
	errMissingToken = echo.NewHTTPError(http.StatusUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
	errInvalidToken = echo.NewHTTPError(http.StatusUnauthorized, "invalid or expired token")
)

// authenticate requires a bearer token (JWT or API key) on /api routes
// other than the public ones when auth is on. /worker and /hooks keep
// their own credentials.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.auth == nil {
			return next(c)
		}
		if !underAPI(c.Request().URL.Path) || publicRoutes[c.Path()] {
			return next(c)
		}
		token := bearerToken(c.Request())
		if token == "" && (c.Path() == streamRoute || c.Path() == eventsRoute) {
			token = c.QueryParam("token")
		}
		if token == "" {
			return errMissingToken
		}
		p, err := s.auth.principalOf(c.Request().Context(), token)
		if err != nil {
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// bearerToken reads `Authorization: Bearer <token>` (scheme in any case).
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// principalOf resolves a token to its user: 401 for anything that does not
// name a live user, a store failure as itself.
func (a *authService) principalOf(ctx context.Context, token string) (*principal, error) {
	p := &principal{}
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
		p.user, p.family = &User{ID: claims.Subject}, claims.Family
	}
	p, key, err := a.resolve(ctx, p)
	switch {
	case errors.Is(err, endKeyExpired):
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "api key expired")
	case errors.As(err, new(*streamEnd)):
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
func (a *authService) resolve(ctx context.Context, p *principal) (*principal, *APIKey, error) {
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
		userID = p.user.ID
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
	return &principal{user: u, keyHash: p.keyHash, family: p.family}, key, nil
}

// caller returns the request's principal; nil when auth is off.
func caller(c echo.Context) *principal {
	p, _ := c.Get(principalKey).(*principal)
	return p
}

// jobSource attributes a job created through the API: to the calling user
// with auth on, to "api" without (DESIGN.md "source_type").
func jobSource(c echo.Context) (string, *string) {
	if p := caller(c); p != nil {
		email := p.user.Email
		return engine.SourceUser, &email
	}
	return engine.SourceAPI, nil
}

// actorName names who answered an approval: the user's email with auth on.
func actorName(c echo.Context) string {
	if p := caller(c); p != nil {
		return p.user.Email
	}
	return "anonymous"
}

// requireAdmin guards the admin endpoints (403 for other users).
func (s *server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := caller(c)
		if p == nil {
			return errMissingToken
		}
		if !p.user.IsAdmin {
			return echo.NewHTTPError(http.StatusForbidden, "admin privileges required")
		}
		return next(c)
	}
}
