package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// OIDC login bookkeeping.
const (
	// oidcStateTTL is how long a user has at the identity provider.
	oidcStateTTL = 10 * time.Minute
	// maxPendingLogins bounds the in-memory states, since starting a login
	// needs no credentials.
	maxPendingLogins = 10000
	// loginCallbackPath is the UI page that takes the tokens from the
	// fragment (which never reaches a server log).
	loginCallbackPath = "/login/callback"
)

// pendingLogin is what a state stands for until its callback.
type pendingLogin struct {
	provider string
	verifier string // PKCE code verifier
	expires  time.Time
}

// oidcFlows keeps pending logins in memory, one use each: a restart only
// makes logins in progress start over.
type oidcFlows struct {
	auth    *authService
	mu      sync.Mutex
	pending map[string]pendingLogin
	clients map[string]rp.RelyingParty
}

func newOIDCFlows(a *authService) *oidcFlows {
	return &oidcFlows{auth: a, pending: map[string]pendingLogin{}, clients: map[string]rp.RelyingParty{}}
}

// client discovers a provider on first use rather than at start-up, so an
// identity provider that is down does not keep the server from starting;
// a failed discovery is retried by the next login.
func (f *oidcFlows) client(ctx context.Context, id string, p AuthProvider) (rp.RelyingParty, error) {
	f.mu.Lock()
	c := f.clients[id]
	f.mu.Unlock()
	if c != nil {
		return c, nil
	}
	httpClient := f.auth.cfg.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	redirect := strings.TrimRight(f.auth.cfg.BaseURL, "/") + "/api/auth/oidc/" + id + "/callback"
	// PKCE is done here rather than by rp's cookie handler: the verifier
	// stays on the server, in the pending login its state names. The keys
	// are fetched with httpClient, independent of this request.
	c, err := rp.NewRelyingPartyOIDC(ctx, p.IssuerURL, p.ClientID, p.ClientSecret, redirect,
		[]string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile},
		rp.WithHTTPClient(httpClient), rp.WithSigningAlgsFromDiscovery())
	if err != nil {
		return nil, fmt.Errorf("discover oidc provider %s: %w", id, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if existing := f.clients[id]; existing != nil {
		return existing, nil
	}
	f.clients[id] = c
	return c, nil
}

// begin records a new pending login and returns its state.
func (f *oidcFlows) begin(provider, verifier string) (string, error) {
	b, err := randomBytes(32)
	if err != nil {
		return "", err
	}
	state := base64.RawURLEncoding.EncodeToString(b)
	now := f.auth.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.pending) >= maxPendingLogins {
		for s, p := range f.pending {
			if !now.Before(p.expires) {
				delete(f.pending, s)
			}
		}
	}
	if len(f.pending) >= maxPendingLogins {
		return "", echo.NewHTTPError(http.StatusServiceUnavailable, "too many sign-ins in progress; try again in a few minutes")
	}
	f.pending[state] = pendingLogin{provider: provider, verifier: verifier, expires: now.Add(oidcStateTTL)}
	return state, nil
}

// finish consumes a state: it works once, for its provider, before expiry.
func (f *oidcFlows) finish(state, provider string) (pendingLogin, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pending[state]
	if !ok {
		return pendingLogin{}, false
	}
	delete(f.pending, state)
	if p.provider != provider || !f.auth.now().Before(p.expires) {
		return pendingLogin{}, false
	}
	return p, true
}

// oidcProviderParam returns the OIDC provider named by the path (404 for
// unknown ids and for the internal provider).
func (s *server) oidcProviderParam(c echo.Context) (string, AuthProvider, error) {
	id := c.Param("provider")
	p, ok := s.auth.cfg.Providers[id]
	if !ok || p.Type != ProviderOIDC {
		return "", AuthProvider{}, notFound("oidc provider %q", id)
	}
	return id, p, nil
}

// oidcStart sends the browser to the identity provider: authorization code
// flow with PKCE (S256) and a one-use state.
func (s *server) oidcStart(c echo.Context) error {
	id, p, err := s.oidcProviderParam(c)
	if err != nil {
		return err
	}
	client, err := s.auth.oidc.client(c.Request().Context(), id, p)
	if err != nil {
		s.log.Error("oidc login", "provider", id, "err", err)
		return echo.NewHTTPError(http.StatusBadGateway, fmt.Sprintf("identity provider %s is unreachable", id))
	}
	// 32 random octets, base64url: a PKCE verifier as RFC 7636 4.1 advises.
	b, err := randomBytes(32)
	if err != nil {
		return err
	}
	verifier := base64.RawURLEncoding.EncodeToString(b)
	state, err := s.auth.oidc.begin(id, verifier)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, rp.AuthURL(state, client, rp.WithCodeChallenge(oidc.NewSHACodeChallenge(verifier))))
}

// oidcCallback completes a login and hands the tokens to the UI in the URL
// fragment; every failure also goes back to the UI, as #error=.
func (s *server) oidcCallback(c echo.Context) error {
	id, p, err := s.oidcProviderParam(c)
	if err != nil {
		return err
	}
	pair, err := s.completeOIDC(c, id, p)
	if err != nil {
		s.log.Warn("oidc login failed", "provider", id, "err", err)
		return c.Redirect(http.StatusFound, loginCallbackPath+"#error="+fragmentEscape(err.Error()))
	}
	v := url.Values{"access_token": {pair.AccessToken}, "refresh_token": {pair.RefreshToken}}
	return c.Redirect(http.StatusFound, loginCallbackPath+"#"+v.Encode())
}

func (s *server) completeOIDC(c echo.Context, id string, p AuthProvider) (*tokenPair, error) {
	q := c.QueryParams()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("identity provider refused the login: %s %s", e, q.Get("error_description"))
	}
	login, ok := s.auth.oidc.finish(q.Get("state"), id)
	if !ok {
		return nil, errors.New("invalid or expired login state; start the login again")
	}
	code := q.Get("code")
	if code == "" {
		return nil, errors.New("the identity provider sent no authorization code")
	}
	ctx := c.Request().Context()
	client, err := s.auth.oidc.client(ctx, id, p)
	if err != nil {
		return nil, err
	}
	// CodeExchange verifies the ID token: signature by the provider's
	// keys, issuer, audience (our client id), expiry and at_hash.
	tokens, err := rp.CodeExchange[*oidc.IDTokenClaims](ctx, code, client, rp.WithCodeVerifier(login.verifier))
	if errors.Is(err, rp.ErrMissingIDToken) {
		return nil, errors.New("the identity provider returned no id_token")
	}
	if err != nil {
		return nil, fmt.Errorf("exchange authorization code and verify id token: %w", err)
	}
	claims := tokens.IDTokenClaims
	email := strings.TrimSpace(claims.Email)
	if email == "" {
		return nil, errors.New("the identity provider did not share an email address (scope email)")
	}
	// An address the provider says it has not verified could claim
	// someone else's account through the email rule, so it is refused. A
	// provider that says nothing about it is trusted.
	if emailUnverified(claims) {
		return nil, fmt.Errorf("email %s is not verified by the identity provider", email)
	}
	now := s.auth.now().UTC()
	newUser := &User{ID: uuid.NewString(), Email: email, Groups: []string{}, CreatedAt: now}
	if name := firstNonEmpty(strings.TrimSpace(claims.Name), strings.TrimSpace(claims.PreferredUsername)); name != "" {
		newUser.Name = &name
	}
	u, err := s.auth.users.ProvisionLinkedUser(ctx, AuthLink{Provider: id, Subject: claims.Subject, CreatedAt: now}, email, newUser)
	if err != nil {
		return nil, err
	}
	return s.auth.issueTokens(ctx, u)
}

// emailUnverified reports an email_verified claim that is present and
// false (a boolean, or the string "false" some providers send).
func emailUnverified(claims *oidc.IDTokenClaims) bool {
	if claims.EmailVerified {
		return false
	}
	switch v := claims.Claims["email_verified"].(type) {
	case bool:
		return !v
	case string:
		return strings.EqualFold(v, "false")
	}
	return false
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// fragmentEscape percent-encodes for a URL fragment value, with %20 for
// spaces so decodeURIComponent reads it back exactly.
func fragmentEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
