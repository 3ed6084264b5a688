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

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"
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

// oidcClient is one provider, discovered.
type oidcClient struct {
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// oidcFlows keeps pending logins in memory, one use each: a restart only
// makes logins in progress start over.
type oidcFlows struct {
	auth    *authService
	mu      sync.Mutex
	pending map[string]pendingLogin
	clients map[string]*oidcClient
}

func newOIDCFlows(a *authService) *oidcFlows {
	return &oidcFlows{auth: a, pending: map[string]pendingLogin{}, clients: map[string]*oidcClient{}}
}

// client discovers a provider on first use rather than at start-up, so an
// identity provider that is down does not keep the server from starting;
// a failed discovery is retried by the next login.
func (f *oidcFlows) client(ctx context.Context, id string, p AuthProvider) (*oidcClient, error) {
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
	ctx = oidc.ClientContext(ctx, httpClient)
	provider, err := oidc.NewProvider(ctx, p.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover oidc provider %s: %w", id, err)
	}
	c = &oidcClient{
		oauth: &oauth2.Config{
			ClientID:     p.ClientID,
			ClientSecret: p.ClientSecret,
			Endpoint:     provider.Endpoint(),
			RedirectURL:  strings.TrimRight(f.auth.cfg.BaseURL, "/") + "/api/auth/oidc/" + id + "/callback",
			Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
		},
		// The keys are fetched with httpClient, independent of this request.
		verifier: provider.VerifierContext(oidc.ClientContext(context.Background(), httpClient), &oidc.Config{ClientID: p.ClientID}),
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
	verifier := oauth2.GenerateVerifier()
	state, err := s.auth.oidc.begin(id, verifier)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, client.oauth.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
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

// oidcClaims are the ID token claims the login reads.
type oidcClaims struct {
	Email             string `json:"email"`
	EmailVerified     *bool  `json:"email_verified"`
	Name              string `json:"name"`
	PreferredUsername string `json:"preferred_username"`
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
	httpClient := s.auth.cfg.HTTPClient
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	tok, err := client.oauth.Exchange(context.WithValue(ctx, oauth2.HTTPClient, httpClient), code, oauth2.VerifierOption(login.verifier))
	if err != nil {
		return nil, fmt.Errorf("exchange authorization code: %w", err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, errors.New("the identity provider returned no id_token")
	}
	idToken, err := client.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("verify id token: %w", err)
	}
	var claims oidcClaims
	if err := idToken.Claims(&claims); err != nil {
		return nil, fmt.Errorf("read id token claims: %w", err)
	}
	email := strings.TrimSpace(claims.Email)
	if email == "" {
		return nil, errors.New("the identity provider did not share an email address (scope email)")
	}
	// An address the provider says it has not verified could claim
	// someone else's account through the email rule, so it is refused.
	if claims.EmailVerified != nil && !*claims.EmailVerified {
		return nil, fmt.Errorf("email %s is not verified by the identity provider", email)
	}
	now := s.auth.now().UTC()
	newUser := &User{ID: uuid.NewString(), Email: email, Groups: []string{}, CreatedAt: now}
	if name := firstNonEmpty(claims.Name, claims.PreferredUsername); name != "" {
		newUser.Name = &name
	}
	u, err := s.auth.users.ProvisionLinkedUser(ctx, AuthLink{Provider: id, Subject: idToken.Subject, CreatedAt: now}, email, newUser)
	if err != nil {
		return nil, err
	}
	return s.auth.issueTokens(ctx, u)
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
