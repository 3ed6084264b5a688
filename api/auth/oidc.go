package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
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
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
)

// OIDC login bookkeeping.
const (
	// oidcFlowTTL is how long a user has at the identity provider.
	oidcFlowTTL = 10 * time.Minute
	// oidcFlowCookie carries a login in progress; only the OIDC routes
	// receive it.
	oidcFlowCookie     = "appliance_oidc"
	oidcFlowCookiePath = "/api/auth/oidc/"
	// loginCallbackPath is the UI page that takes the tokens from the
	// fragment (which never reaches a server log).
	loginCallbackPath = "/login/callback"
)

// oidcFlow is a login in progress. It lives in the browser that started
// it, in a cookie signed and encrypted under keys only this server process
// holds, so a callback is accepted only in that browser (no login CSRF),
// nobody can forge or read one, and a restart only restarts logins in
// progress.
type oidcFlow struct {
	Provider string `json:"p"`
	State    string `json:"s"`
	Nonce    string `json:"n"` // sent to the provider, checked in the ID token
	Verifier string `json:"v"` // PKCE code verifier
}

// oidcFlows keeps the relying parties and the flow cookies' keys.
type oidcFlows struct {
	auth    *Service
	mu      sync.Mutex
	cookies *httphelper.CookieHandler
	clients map[string]rp.RelyingParty
}

func newOIDCFlows(a *Service) *oidcFlows {
	return &oidcFlows{auth: a, clients: map[string]rp.RelyingParty{}}
}

// nonceKey carries a callback's expected nonce to the ID token verifier,
// which the relying party shares across logins.
type nonceKey struct{}

// client discovers a provider on first use rather than at start-up, so an
// identity provider that is down does not keep the server from starting;
// a failed discovery is retried by the next login.
func (f *oidcFlows) client(ctx context.Context, id string, p Provider) (rp.RelyingParty, error) {
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
	// State, nonce and PKCE verifier travel in our one flow cookie rather
	// than rp's cookies (one per value, for every path), so rp gets no
	// cookie handler. The keys are fetched with httpClient, independent of
	// this request.
	c, err := rp.NewRelyingPartyOIDC(ctx, p.IssuerURL, p.ClientID, p.ClientSecret, redirect,
		[]string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile},
		rp.WithHTTPClient(httpClient), rp.WithSigningAlgsFromDiscovery(),
		rp.WithVerifierOpts(rp.WithNonce(func(ctx context.Context) string {
			n, _ := ctx.Value(nonceKey{}).(string)
			return n
		})))
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

// cookieHandler signs (HMAC-SHA256) and encrypts (AES-256) flow cookies
// under random keys made on first use, when base_url is known: the cookie
// is Secure when the server is reached over https. Lax, so the provider's
// top-level redirect back carries it. The signed timestamp makes a cookie
// older than oidcFlowTTL invalid, whatever the browser kept.
func (f *oidcFlows) cookieHandler() (*httphelper.CookieHandler, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cookies != nil {
		return f.cookies, nil
	}
	hashKey, err := randomBytes(64)
	if err != nil {
		return nil, err
	}
	blockKey, err := randomBytes(32)
	if err != nil {
		return nil, err
	}
	opts := []httphelper.CookieHandlerOpt{
		httphelper.WithPath(oidcFlowCookiePath),
		httphelper.WithMaxAge(int(oidcFlowTTL / time.Second)),
		httphelper.WithSameSite(http.SameSiteLaxMode),
	}
	if !strings.HasPrefix(strings.ToLower(f.auth.cfg.BaseURL), "https://") {
		opts = append(opts, httphelper.WithUnsecure())
	}
	f.cookies = httphelper.NewCookieHandler(hashKey, blockKey, opts...)
	return f.cookies, nil
}

// begin starts a login with provider: a fresh state, nonce and verifier,
// set in the flow cookie.
func (f *oidcFlows) begin(w http.ResponseWriter, provider string) (oidcFlow, error) {
	flow := oidcFlow{Provider: provider}
	for _, v := range []*string{&flow.State, &flow.Nonce, &flow.Verifier} {
		// 32 random octets, base64url: a PKCE verifier as RFC 7636 4.1
		// advises, and as unguessable a state and nonce.
		b, err := randomBytes(32)
		if err != nil {
			return oidcFlow{}, err
		}
		*v = base64.RawURLEncoding.EncodeToString(b)
	}
	cookies, err := f.cookieHandler()
	if err != nil {
		return oidcFlow{}, err
	}
	value, err := json.Marshal(flow)
	if err != nil {
		return oidcFlow{}, fmt.Errorf("encode oidc login: %w", err)
	}
	if err := cookies.SetCookie(w, oidcFlowCookie, string(value)); err != nil {
		return oidcFlow{}, fmt.Errorf("set oidc login cookie: %w", err)
	}
	return flow, nil
}

// finish takes the login this browser started with provider, if the
// callback's state is its state, and clears its cookie: it works once.
// Anything else is a 400, and the cookie stays for the real callback.
func (f *oidcFlows) finish(w http.ResponseWriter, r *http.Request, provider string) (oidcFlow, error) {
	cookies, err := f.cookieHandler()
	if err != nil {
		return oidcFlow{}, err
	}
	value, err := cookies.CheckCookie(r, oidcFlowCookie)
	if errors.Is(err, http.ErrNoCookie) {
		return oidcFlow{}, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(
			"no sign-in with %s was started in this browser in the last %s (its cookie is missing); start the login again", provider, oidcFlowTTL))
	}
	var flow oidcFlow
	if err == nil {
		err = json.Unmarshal([]byte(value), &flow)
	}
	if err != nil {
		f.auth.log.Warn("oidc login cookie refused", "provider", provider, "err", err)
		return oidcFlow{}, echo.NewHTTPError(http.StatusBadRequest,
			"the sign-in cookie is expired or was not made by this server (it restarted, or the cookie was altered); start the login again")
	}
	if flow.Provider != provider {
		return oidcFlow{}, echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(
			"this browser started a sign-in with %s, not %s; start the login again", flow.Provider, provider))
	}
	if flow.State == "" || subtle.ConstantTimeCompare([]byte(flow.State), []byte(r.URL.Query().Get("state"))) != 1 {
		return oidcFlow{}, echo.NewHTTPError(http.StatusBadRequest,
			"the callback's state is not that of the sign-in this browser started (a callback from another browser's sign-in is refused); start the login again")
	}
	cookies.DeleteCookie(w, oidcFlowCookie)
	return flow, nil
}

// oidcProviderParam returns the OIDC provider named by the path (404 for
// unknown ids and for the internal provider).
func (a *Service) oidcProviderParam(c echo.Context) (string, Provider, error) {
	id := c.Param("provider")
	p, ok := a.cfg.Providers[id]
	if !ok || p.Type != ProviderOIDC {
		return "", Provider{}, httpx.NotFound("oidc provider %q", id)
	}
	return id, p, nil
}

// oidcStart sends the browser to the identity provider: authorization code
// flow with PKCE (S256), a state and a nonce, all three bound to this
// browser by the flow cookie.
func (a *Service) oidcStart(c echo.Context) error {
	id, p, err := a.oidcProviderParam(c)
	if err != nil {
		return err
	}
	client, err := a.oidc.client(c.Request().Context(), id, p)
	if err != nil {
		a.log.Error("oidc login", "provider", id, "err", err)
		return echo.NewHTTPError(http.StatusBadGateway, fmt.Sprintf("identity provider %s is unreachable", id))
	}
	flow, err := a.oidc.begin(c.Response(), id)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusFound, rp.AuthURL(flow.State, client,
		rp.WithCodeChallenge(oidc.NewSHACodeChallenge(flow.Verifier)),
		rp.AuthURLOpt(rp.WithURLParam("nonce", flow.Nonce))))
}

// oidcCallback completes a login and hands the tokens to the UI in the URL
// fragment. A callback this browser did not start is a 400: it is either
// forged or someone else's login, and the UI has nothing to show for it.
// Every other failure goes back to the UI, as #error=.
func (a *Service) oidcCallback(c echo.Context) error {
	id, p, err := a.oidcProviderParam(c)
	if err != nil {
		return err
	}
	flow, err := a.oidc.finish(c.Response(), c.Request(), id)
	if err != nil {
		return err
	}
	pair, err := a.completeOIDC(c, id, p, flow)
	if err != nil {
		a.log.Warn("oidc login failed", "provider", id, "err", err)
		return c.Redirect(http.StatusFound, loginCallbackPath+"#error="+fragmentEscape(err.Error()))
	}
	v := url.Values{"access_token": {pair.AccessToken}, "refresh_token": {pair.RefreshToken}}
	return c.Redirect(http.StatusFound, loginCallbackPath+"#"+v.Encode())
}

func (a *Service) completeOIDC(c echo.Context, id string, p Provider, flow oidcFlow) (*wire.TokenPair, error) {
	q := c.QueryParams()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("identity provider refused the login: %s %s", e, q.Get("error_description"))
	}
	code := q.Get("code")
	if code == "" {
		return nil, errors.New("the identity provider sent no authorization code")
	}
	ctx := c.Request().Context()
	client, err := a.oidc.client(ctx, id, p)
	if err != nil {
		return nil, err
	}
	// CodeExchange verifies the ID token: signature by the provider's
	// keys, issuer, audience (our client id), expiry, at_hash and the
	// nonce of this browser's login, so a token issued for another login
	// (replayed, or injected with a stolen code) is refused.
	tokens, err := rp.CodeExchange[*oidc.IDTokenClaims](context.WithValue(ctx, nonceKey{}, flow.Nonce), code, client, rp.WithCodeVerifier(flow.Verifier))
	switch {
	case errors.Is(err, rp.ErrMissingIDToken):
		return nil, errors.New("the identity provider returned no id_token")
	case errors.Is(err, oidc.ErrNonceInvalid):
		return nil, errors.New("the id token's nonce is not that of this sign-in (a token issued for another sign-in is refused); start the login again")
	case err != nil:
		return nil, fmt.Errorf("exchange authorization code and verify id token: %w", err)
	}
	claims := tokens.IDTokenClaims
	email := strings.TrimSpace(claims.Email)
	if email == "" {
		return nil, errors.New("the identity provider did not share an email address (scope email)")
	}
	now := a.now().UTC()
	newUser := &User{ID: uuid.NewString(), Email: email, Groups: []string{}, CreatedAt: now}
	if name := firstNonEmpty(strings.TrimSpace(claims.Name), strings.TrimSpace(claims.PreferredUsername)); name != "" {
		newUser.Name = &name
	}
	// Only an address the provider vouches for may link an account or
	// name a new one; an admin is linked by email only if the provider's
	// config says so (its users' addresses could otherwise take over one).
	rule := accounts.LinkRule{EmailVerified: bool(claims.EmailVerified), LinkAdmins: p.LinkExisting}
	u, err := a.users.ProvisionLinkedUser(ctx, AuthLink{Provider: id, Subject: claims.Subject, CreatedAt: now}, email, newUser, rule)
	switch {
	case errors.Is(err, accounts.ErrEmailUnverified):
		return nil, fmt.Errorf("email %s is not verified by the identity provider (its ID token must say email_verified: true before the login is linked to an account or creates one); verify the address at %s and sign in again", email, id)
	case errors.Is(err, accounts.ErrAdminNotLinked):
		return nil, fmt.Errorf("%s is an admin's account, which a sign-in at %s is not linked to by email; sign in with the password, or set auth.providers.%s.link_existing: true to allow it", email, id, id)
	case err != nil:
		return nil, err
	}
	return a.issueTokens(c, u, "oidc:"+id)
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
