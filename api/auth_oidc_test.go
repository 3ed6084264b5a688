package api_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"net/http/cookiejar"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/oidctest"
)

// publicHost is the server's public name in base_url; the browser below
// reaches it at the fixture's address, as a reverse proxy would.
const publicHost = "appliance.test"

// oidcFixture is an auth fixture with a real OpenID Provider, "mock".
type oidcFixture struct {
	*authFixture
	idp     *oidctest.Provider
	browser *http.Client
}

func newOIDCFixture(t *testing.T) *oidcFixture {
	t.Helper()
	idp := oidctest.Start(t, "http://"+publicHost+"/api/auth/oidc/mock/callback")
	f := newAuthFixture(t, map[string]api.AuthProvider{
		"mock": {Type: api.ProviderOIDC, DisplayName: "Mock", IssuerURL: idp.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret},
	})
	// Set before the first request; the OIDC client reads it on first use.
	f.cfg.BaseURL = "http://" + publicHost
	server := strings.TrimPrefix(f.url, "http://")
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == publicHost+":80" {
				addr = server
			}
			return dialer.DialContext(ctx, network, addr)
		}},
		// The chain ends at the UI's callback page: its fragment is the result.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Path == "/login/callback" {
				return http.ErrUseLastResponse
			}
			if len(via) > 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return &oidcFixture{authFixture: f, idp: idp, browser: browser}
}

// signIn runs the browser through the whole login, signing in at the
// provider's form as user, and returns the fragment of the final redirect
// to the UI.
func (f *oidcFixture) signIn(user oidctest.User) url.Values {
	f.t.Helper()
	if user.Password == "" {
		user.Password = "idp-password"
	}
	f.idp.AddUser(user)
	loc := f.submitLogin(user.Email, user.Password)
	return f.fragment(loc)
}

// submitLogin starts a login, follows it to the provider's form, posts
// the credentials there and returns where the chain ended: the Location
// of the redirect to the UI, or "" when the provider answered itself.
func (f *oidcFixture) submitLogin(username, password string) string {
	f.t.Helper()
	resp, err := f.browser.Get("http://" + publicHost + "/api/auth/oidc/mock")
	if err != nil {
		f.t.Fatalf("start login: %v", err)
	}
	resp.Body.Close()
	form := resp.Request.URL
	if resp.StatusCode != http.StatusOK || form.Path != oidctest.LoginPath || !strings.HasPrefix(form.String(), f.idp.Issuer()) {
		f.t.Fatalf("login start ended at %s with %d, want the provider's login form", form, resp.StatusCode)
	}
	resp, err = f.browser.PostForm(f.idp.Issuer()+oidctest.LoginPath, url.Values{
		"id": {form.Query().Get("authRequestID")}, "username": {username}, "password": {password},
	})
	if err != nil {
		f.t.Fatalf("sign in at the provider: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return ""
	}
	return resp.Header.Get("Location")
}

// visit follows redirects from u up to the UI callback and returns its
// fragment.
func (f *oidcFixture) visit(u string) url.Values {
	f.t.Helper()
	resp, err := f.browser.Get(u)
	if err != nil {
		f.t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("GET %s ended with %d; want a 302 to /login/callback#...", u, resp.StatusCode)
	}
	return f.fragment(resp.Header.Get("Location"))
}

// fragment reads the result of a login from the Location to the UI.
func (f *oidcFixture) fragment(loc string) url.Values {
	f.t.Helper()
	if !strings.HasPrefix(loc, "/login/callback#") {
		f.t.Fatalf("login ended at Location %q; want a 302 to /login/callback#...", loc)
	}
	frag, err := url.ParseQuery(strings.TrimPrefix(loc, "/login/callback#"))
	if err != nil {
		f.t.Fatalf("fragment of %q: %v", loc, err)
	}
	return frag
}

// tokens checks the fragment holds tokens and returns the access token.
func tokens(t *testing.T, frag url.Values) string {
	t.Helper()
	if frag.Get("error") != "" || frag.Get("access_token") == "" || frag.Get("refresh_token") == "" {
		t.Fatalf("login fragment = %v, want tokens", frag)
	}
	return frag.Get("access_token")
}

func (f *oidcFixture) authMethods(admin, userID string) string {
	f.t.Helper()
	return fmt.Sprint(f.as(admin, "GET", "/api/users/"+userID, nil).expect(200).object()["auth_methods"])
}

func TestOIDCStartRedirectsToTheProviderWithPKCE(t *testing.T) {
	f := newOIDCFixture(t)
	noFollow := *f.browser
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get("http://" + publicHost + "/api/auth/oidc/mock")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want 302", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != f.idp.Issuer()+"/authorize" {
		t.Fatalf("redirect to %s, want %s/authorize", got, f.idp.Issuer())
	}
	checks := map[string]string{
		"response_type":         "code",
		"client_id":             oidctest.ClientID,
		"redirect_uri":          "http://" + publicHost + "/api/auth/oidc/mock/callback",
		"code_challenge_method": "S256",
	}
	for k, want := range checks {
		if q.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, q.Get(k), want)
		}
	}
	// S256 challenges are 43 characters of base64url; states are random.
	if len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 32 || !strings.Contains(q.Get("scope"), "openid") {
		t.Errorf("challenge %q, state %q, scope %q", q.Get("code_challenge"), q.Get("state"), q.Get("scope"))
	}

	f.api("GET", "/api/auth/oidc/nope", nil).expectError(404, "nope")
	f.api("GET", "/api/auth/oidc/local", nil).expectError(404, "local")
	f.api("GET", "/api/auth/oidc/nope/callback?code=x&state=y", nil).expect(404)
}

func TestOIDCCallbackProvisionsANewUser(t *testing.T) {
	f := newOIDCFixture(t)
	f.addUser("admin@example.com", "pw", true)
	admin, _ := f.login("admin@example.com", "pw")

	access := tokens(t, f.signIn(oidctest.User{Subject: "sub-new", Email: "new@example.com", Name: "newbie", EmailVerified: true}))
	me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object()
	if me["email"] != "new@example.com" || me["name"] != "newbie" || me["is_admin"] != false {
		t.Fatalf("me = %v", me)
	}
	if got := f.authMethods(admin, me["user_id"].(string)); got != "[oidc:mock]" {
		t.Fatalf("auth_methods = %s, want [oidc:mock] (no password)", got)
	}
	// A user without a password cannot log in with one.
	f.api("POST", "/api/auth/login", map[string]string{"email": "new@example.com", "password": ""}).expect(400)
	f.api("POST", "/api/auth/login", map[string]string{"email": "new@example.com", "password": "guess"}).expect(401)
}

func TestOIDCLinksAUserWithTheSameEmail(t *testing.T) {
	f := newOIDCFixture(t)
	adaID := f.addUser("ada@example.com", "pw", true)
	admin, _ := f.login("ada@example.com", "pw")

	access := tokens(t, f.signIn(oidctest.User{Subject: "sub-ada", Email: "Ada@Example.com", EmailVerified: true}))
	if me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object(); me["user_id"] != adaID {
		t.Fatalf("oidc login gave user %v, want the existing %s", me["user_id"], adaID)
	}
	if got := f.authMethods(admin, adaID); got != "[internal oidc:mock]" {
		t.Fatalf("auth_methods = %s, want [internal oidc:mock]", got)
	}
	f.login("ada@example.com", "pw")
}

func TestOIDCReusesTheLinkEvenWhenTheEmailChanges(t *testing.T) {
	f := newOIDCFixture(t)
	first := tokens(t, f.signIn(oidctest.User{Subject: "sub-1", Email: "old@example.com", EmailVerified: true}))
	second := tokens(t, f.signIn(oidctest.User{Subject: "sub-1", Email: "renamed@example.com", EmailVerified: true}))
	a := f.as(first, "GET", "/api/auth/me", nil).expect(200).object()
	b := f.as(second, "GET", "/api/auth/me", nil).expect(200).object()
	if a["user_id"] != b["user_id"] || b["email"] != "old@example.com" {
		t.Fatalf("first login %v, second %v; want the linked user both times", a, b)
	}
}

func TestOIDCBadOrReusedStateEndsInAnError(t *testing.T) {
	f := newOIDCFixture(t)
	frag := f.visit("http://" + publicHost + "/api/auth/oidc/mock/callback?code=anything&state=forged")
	if !strings.Contains(frag.Get("error"), "state") || frag.Get("access_token") != "" {
		t.Fatalf("forged state: fragment %v, want an error about the state", frag)
	}

	// Capture a real callback URL, use it, then replay it.
	var callback string
	capture, check := *f.browser, f.browser.CheckRedirect
	capture.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == "/api/auth/oidc/mock/callback" {
			callback = req.URL.String()
		}
		return check(req, via)
	}
	f.browser = &capture
	f.idp.AddUser(oidctest.User{Subject: "sub-replay", Email: "replay@example.com", EmailVerified: true, Password: "pw"})
	tokens(t, f.fragment(f.submitLogin("replay@example.com", "pw")))
	if callback == "" {
		t.Fatal("the provider never redirected to the callback")
	}
	frag = f.visit(callback)
	if !strings.Contains(frag.Get("error"), "state") {
		t.Fatalf("replayed callback: fragment %v, want an error about the state", frag)
	}

	frag = f.visit("http://" + publicHost + "/api/auth/oidc/mock/callback?error=access_denied&error_description=user+said+no")
	if !strings.Contains(frag.Get("error"), "access_denied") {
		t.Fatalf("provider error: fragment %v", frag)
	}
}

func TestOIDCRefusesAnUnverifiedEmail(t *testing.T) {
	f := newOIDCFixture(t)
	f.addUser("ada@example.com", "pw", false)
	frag := f.signIn(oidctest.User{Subject: "attacker", Email: "ada@example.com", EmailVerified: false})
	if !strings.Contains(frag.Get("error"), "not verified") || frag.Get("access_token") != "" {
		t.Fatalf("fragment = %v, want an error about the unverified email", frag)
	}
}

func TestOIDCRefusesAnIDTokenForAnotherAudience(t *testing.T) {
	f := newOIDCFixture(t)
	f.idp.SetAudience("some-other-client")
	frag := f.signIn(oidctest.User{Subject: "sub-aud", Email: "aud@example.com", EmailVerified: true})
	if !strings.Contains(frag.Get("error"), "audience") || frag.Get("access_token") != "" {
		t.Fatalf("fragment = %v, want an error about the audience", frag)
	}
	// The same identity signs in once the token is for us.
	f.idp.SetAudience("")
	tokens(t, f.signIn(oidctest.User{Subject: "sub-aud", Email: "aud@example.com", EmailVerified: true}))
}

func TestOIDCRefusesAnExpiredIDToken(t *testing.T) {
	f := newOIDCFixture(t)
	f.idp.SetIDTokenLifetime(-time.Minute)
	frag := f.signIn(oidctest.User{Subject: "sub-exp", Email: "exp@example.com", EmailVerified: true})
	if !strings.Contains(frag.Get("error"), "expired") || frag.Get("access_token") != "" {
		t.Fatalf("fragment = %v, want an error about the expired token", frag)
	}
}

func TestOIDCWrongPasswordAtTheProviderIssuesNoTokens(t *testing.T) {
	f := newOIDCFixture(t)
	f.idp.AddUser(oidctest.User{Subject: "sub-pw", Email: "pw@example.com", EmailVerified: true, Password: "right"})
	if loc := f.submitLogin("pw@example.com", "wrong"); loc != "" {
		t.Fatalf("a wrong password at the provider redirected to %q", loc)
	}
}
