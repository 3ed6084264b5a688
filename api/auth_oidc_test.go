package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/auth/oidctest"
	"github.com/appliance-sh/appliance/api/openapitest"
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

// newOIDCFixture starts the fixture; opts adjust the "mock" provider's
// config.
func newOIDCFixture(t *testing.T, opts ...func(*auth.Provider)) *oidcFixture {
	t.Helper()
	idp := oidctest.Start(t, "http://"+publicHost+"/api/auth/oidc/mock/callback")
	mock := auth.Provider{Type: auth.ProviderOIDC, DisplayName: "Mock", IssuerURL: idp.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret}
	for _, o := range opts {
		o(&mock)
	}
	f := &oidcFixture{authFixture: newAuthFixture(t, map[string]auth.Provider{"mock": mock}), idp: idp}
	// Set before the first request; the OIDC client reads it on first use.
	f.cfg.BaseURL = "http://" + publicHost
	f.browser = f.newBrowser()
	return f
}

// newBrowser is a browser with its own cookies that reaches the server at
// publicHost.
func (f *oidcFixture) newBrowser() *http.Client {
	f.t.Helper()
	server := strings.TrimPrefix(f.url, "http://")
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	jar, err := cookiejar.New(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		// Our answers are checked against the OpenAPI document on the way.
		Transport: openapitest.Transport(&http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == publicHost+":80" {
				addr = server
			}
			return dialer.DialContext(ctx, network, addr)
		}}),
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
	loc := f.submitLogin(f.browser, user.Email, user.Password)
	return f.fragment(loc)
}

// submitLogin starts a login in browser, follows it to the provider's form, posts
// the credentials there and returns where the chain ended: the Location
// of the redirect to the UI, or "" when the provider answered itself.
func (f *oidcFixture) submitLogin(browser *http.Client, username, password string) string {
	f.t.Helper()
	resp, err := browser.Get("http://" + publicHost + "/api/auth/oidc/mock")
	if err != nil {
		f.t.Fatalf("start login: %v", err)
	}
	resp.Body.Close()
	form := resp.Request.URL
	if resp.StatusCode != http.StatusOK || form.Path != oidctest.LoginPath || !strings.HasPrefix(form.String(), f.idp.Issuer()) {
		f.t.Fatalf("login start ended at %s with %d, want the provider's login form", form, resp.StatusCode)
	}
	resp, err = browser.PostForm(f.idp.Issuer()+oidctest.LoginPath, url.Values{
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
	return f.visitIn(f.browser, u)
}

// visitIn is visit in another browser.
func (f *oidcFixture) visitIn(browser *http.Client, u string) url.Values {
	f.t.Helper()
	resp, err := browser.Get(u)
	if err != nil {
		f.t.Fatalf("GET %s: %v", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("GET %s ended with %d; want a 302 to /login/callback#...", u, resp.StatusCode)
	}
	return f.fragment(resp.Header.Get("Location"))
}

// refused opens u in browser and returns the error of its 400 JSON answer.
func (f *oidcFixture) refused(browser *http.Client, u string) string {
	f.t.Helper()
	resp, err := browser.Get(u)
	if err != nil {
		f.t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	var e struct{ Error string }
	if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error == "" {
		f.t.Fatalf("GET %s: %d %s; want a 400 with a JSON error", u, resp.StatusCode, body)
	}
	return e.Error
}

// callbackOf runs a login in browser up to the provider's redirect to our
// callback, signing in as user, and returns that callback URL unvisited
// and the authorization request that started it.
func (f *oidcFixture) callbackOf(browser *http.Client, user oidctest.User) (callback string, authorize *url.URL) {
	f.t.Helper()
	user.Password = "idp-password"
	f.idp.AddUser(user)
	stop := *browser
	stop.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		switch req.URL.Path {
		case "/authorize":
			authorize = req.URL
		case "/api/auth/oidc/mock/callback":
			callback = req.URL.String()
			return http.ErrUseLastResponse
		}
		return browser.CheckRedirect(req, via)
	}
	f.submitLogin(&stop, user.Email, user.Password)
	if callback == "" || authorize == nil {
		f.t.Fatal("the login never went through the provider to the callback")
	}
	return callback, authorize
}

// flowCookie is the login cookie browser holds for the OIDC routes.
func flowCookie(browser *http.Client) *http.Cookie {
	u, _ := url.Parse("http://" + publicHost + "/api/auth/oidc/mock/callback")
	for _, c := range browser.Jar.Cookies(u) {
		if c.Name == "appliance_oidc" {
			return c
		}
	}
	return nil
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

// startLogin starts a login in browser without following it and returns
// the redirect to the provider and the flow cookie it set.
func (f *oidcFixture) startLogin(browser *http.Client) (*url.URL, *http.Cookie) {
	f.t.Helper()
	noFollow := *browser
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get("http://" + publicHost + "/api/auth/oidc/mock")
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		f.t.Fatalf("status %d, want 302", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		f.t.Fatal(err)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "appliance_oidc" {
			cookie = c
		}
	}
	if cookie == nil {
		f.t.Fatalf("the login start set no appliance_oidc cookie: %v", resp.Header.Values("Set-Cookie"))
	}
	return loc, cookie
}

func TestOIDCStartRedirectsToTheProviderWithPKCEAndANonce(t *testing.T) {
	f := newOIDCFixture(t)
	loc, cookie := f.startLogin(f.browser)
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
	// S256 challenges are 43 characters of base64url; states and nonces
	// are random.
	if len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 32 || len(q.Get("nonce")) < 32 || !strings.Contains(q.Get("scope"), "openid") {
		t.Errorf("challenge %q, state %q, nonce %q, scope %q", q.Get("code_challenge"), q.Get("state"), q.Get("nonce"), q.Get("scope"))
	}
	// The flow is bound to this browser by a short-lived cookie that
	// scripts cannot read, sent only to the OIDC routes, not Secure over
	// plain http; it is sealed, so it shows neither the state nor the nonce.
	if !cookie.HttpOnly || cookie.Secure || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/api/auth/oidc/" || cookie.MaxAge != 600 {
		t.Errorf("cookie %s, want HttpOnly, SameSite=Lax, Path=/api/auth/oidc/, Max-Age=600, not Secure over http", cookie)
	}
	if strings.Contains(cookie.Value, q.Get("state")) || strings.Contains(cookie.Value, q.Get("nonce")) {
		t.Errorf("cookie %s shows the state or nonce", cookie.Value)
	}
	// Another login gets another state and nonce.
	again, _ := f.startLogin(f.browser)
	if again.Query().Get("state") == q.Get("state") || again.Query().Get("nonce") == q.Get("nonce") {
		t.Errorf("two logins share a state or nonce: %s and %s", loc, again)
	}

	f.api("GET", "/api/auth/oidc/nope", nil).expectError(404, "nope")
	f.api("GET", "/api/auth/oidc/local", nil).expectError(404, "local")
	f.api("GET", "/api/auth/oidc/nope/callback?code=x&state=y", nil).expect(404)
}

func TestOIDCFlowCookieIsSecureOverHTTPS(t *testing.T) {
	f := newOIDCFixture(t)
	f.cfg.BaseURL = "https://" + publicHost
	if _, cookie := f.startLogin(f.browser); !cookie.Secure || !cookie.HttpOnly {
		t.Fatalf("cookie %s with an https base_url, want Secure and HttpOnly", cookie)
	}
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
	// The login is over: its cookie is gone from the browser.
	if c := flowCookie(f.browser); c != nil {
		t.Fatalf("the browser still holds the login cookie %s", c)
	}
	// A user without a password cannot log in with one.
	f.api("POST", "/api/auth/login", map[string]string{"email": "new@example.com", "password": ""}).expect(400)
	f.api("POST", "/api/auth/login", map[string]string{"email": "new@example.com", "password": "guess"}).expect(401)
}

func TestOIDCLinksAUserWithTheSameEmail(t *testing.T) {
	f := newOIDCFixture(t)
	adaID := f.addUser("ada@example.com", "pw", false)
	f.addUser("admin@example.com", "pw", true)
	admin, _ := f.login("admin@example.com", "pw")

	access := tokens(t, f.signIn(oidctest.User{Subject: "sub-ada", Email: "Ada@Example.com", EmailVerified: true}))
	if me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object(); me["user_id"] != adaID {
		t.Fatalf("oidc login gave user %v, want the existing %s", me["user_id"], adaID)
	}
	if got := f.authMethods(admin, adaID); got != "[internal oidc:mock]" {
		t.Fatalf("auth_methods = %s, want [internal oidc:mock]", got)
	}
	f.login("ada@example.com", "pw")
}

func TestOIDCLinksAnAdminOnlyWithLinkExisting(t *testing.T) {
	// Whoever controls an address at the provider must not become the
	// admin who has it here.
	f := newOIDCFixture(t)
	adminID := f.addUser("root@example.com", "pw", true)
	admin, _ := f.login("root@example.com", "pw")
	frag := f.signIn(oidctest.User{Subject: "sub-root", Email: "root@example.com", EmailVerified: true})
	if msg := frag.Get("error"); !strings.Contains(msg, "admin") || !strings.Contains(msg, "link_existing") || frag.Get("access_token") != "" {
		t.Fatalf("fragment = %v, want an error naming the admin account and link_existing", frag)
	}
	if got := f.authMethods(admin, adminID); got != "[internal]" {
		t.Fatalf("auth_methods = %s, want [internal]: the admin was linked", got)
	}
	if _, total, err := f.users.Users(context.Background(), 10, 0); err != nil || total != 1 {
		t.Fatalf("%d users (%v), want only the admin", total, err)
	}

	linking := newOIDCFixture(t, func(p *auth.Provider) { p.LinkExisting = true })
	adminID = linking.addUser("root@example.com", "pw", true)
	access := tokens(t, linking.signIn(oidctest.User{Subject: "sub-root", Email: "root@example.com", EmailVerified: true}))
	if me := linking.as(access, "GET", "/api/auth/me", nil).expect(200).object(); me["user_id"] != adminID || me["is_admin"] != true {
		t.Fatalf("with link_existing: me = %v, want the admin %s", me, adminID)
	}
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

func TestOIDCRefusesACallbackStartedInAnotherBrowser(t *testing.T) {
	// Login CSRF: the attacker signs in at the provider as themselves and
	// has the victim's browser open the callback, which would sign the
	// victim in to the attacker's account.
	f := newOIDCFixture(t)
	attacker := f.newBrowser()
	callback, _ := f.callbackOf(attacker, oidctest.User{Subject: "sub-mallory", Email: "mallory@example.com", EmailVerified: true})

	victim := f.newBrowser()
	if msg := f.refused(victim, callback); !strings.Contains(msg, "no sign-in with mock was started in this browser") {
		t.Fatalf("victim without a login cookie: error %q", msg)
	}
	// A victim in the middle of their own login has another state.
	f.startLogin(victim)
	if msg := f.refused(victim, callback); !strings.Contains(msg, "state") {
		t.Fatalf("victim with a login of their own: error %q, want one about the state", msg)
	}
	// A cookie altered, or made by another server, is refused too.
	cookie := flowCookie(victim)
	u, _ := url.Parse("http://" + publicHost + "/api/auth/oidc/")
	altered := []byte(cookie.Value)
	altered[len(altered)/2] = map[bool]byte{true: 'B', false: 'A'}[altered[len(altered)/2] == 'A']
	victim.Jar.SetCookies(u, []*http.Cookie{{Name: cookie.Name, Value: string(altered), Path: "/api/auth/oidc/"}})
	if msg := f.refused(victim, callback); !strings.Contains(msg, "not made by this server") {
		t.Fatalf("altered cookie: error %q", msg)
	}
	// The code and state were good: the browser that started the login
	// completes it.
	access := tokens(t, f.visitIn(attacker, callback))
	if me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object(); me["email"] != "mallory@example.com" {
		t.Fatalf("me = %v", me)
	}
}

func TestOIDCRefusesAForgedOrReplayedCallback(t *testing.T) {
	f := newOIDCFixture(t)
	forged := "http://" + publicHost + "/api/auth/oidc/mock/callback?code=anything&state=forged"
	f.refused(f.browser, forged)
	f.startLogin(f.browser)
	if msg := f.refused(f.browser, forged); !strings.Contains(msg, "state") {
		t.Fatalf("forged state: error %q, want one about the state", msg)
	}

	// A real callback works once; replayed, its login is over.
	callback, _ := f.callbackOf(f.browser, oidctest.User{Subject: "sub-replay", Email: "replay@example.com", EmailVerified: true})
	tokens(t, f.visit(callback))
	if msg := f.refused(f.browser, callback); !strings.Contains(msg, "no sign-in") {
		t.Fatalf("replayed callback: error %q", msg)
	}

	// The provider's refusal, with this browser's state, goes to the UI.
	loc, _ := f.startLogin(f.browser)
	frag := f.visit("http://" + publicHost + "/api/auth/oidc/mock/callback?error=access_denied&error_description=user+said+no&state=" + url.QueryEscape(loc.Query().Get("state")))
	if !strings.Contains(frag.Get("error"), "access_denied") {
		t.Fatalf("provider error: fragment %v", frag)
	}
}

func TestOIDCRefusesAnIDTokenForAnotherNonce(t *testing.T) {
	f := newOIDCFixture(t)
	// The nonce of a finished login, which its ID token carried.
	callback, authorize := f.callbackOf(f.browser, oidctest.User{Subject: "sub-n", Email: "n@example.com", EmailVerified: true})
	used := authorize.Query().Get("nonce")
	tokens(t, f.visit(callback))

	for _, tt := range []struct{ name, nonce string }{
		{"no nonce", ""},
		{"another login's nonce", used},
		{"a made-up nonce", "made-up"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &oidcFixture{authFixture: f.in(t), idp: f.idp, browser: f.browser}
			f.idp.SetNonce(tt.nonce)
			frag := f.signIn(oidctest.User{Subject: "sub-n", Email: "n@example.com", EmailVerified: true})
			if !strings.Contains(frag.Get("error"), "nonce") || frag.Get("access_token") != "" {
				t.Fatalf("fragment = %v, want an error about the nonce", frag)
			}
		})
	}
	f.idp.EchoNonce()
	tokens(t, f.signIn(oidctest.User{Subject: "sub-n", Email: "n@example.com", EmailVerified: true}))
}

func TestOIDCRefusesAnUnverifiedEmail(t *testing.T) {
	f := newOIDCFixture(t)
	adaID := f.addUser("ada@example.com", "pw", false)
	f.addUser("admin@example.com", "pw", true)
	admin, _ := f.login("admin@example.com", "pw")
	for _, tt := range []struct {
		name string
		user oidctest.User
	}{
		{"email_verified false, existing account", oidctest.User{Subject: "att-1", Email: "ada@example.com"}},
		{"email_verified missing, existing account", oidctest.User{Subject: "att-2", Email: "ada@example.com", NoEmailVerified: true}},
		{"email_verified missing, new account", oidctest.User{Subject: "att-3", Email: "later@example.com", NoEmailVerified: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &oidcFixture{authFixture: f.in(t), idp: f.idp, browser: f.browser}
			frag := f.signIn(tt.user)
			if !strings.Contains(frag.Get("error"), "is not verified by the identity provider") || frag.Get("access_token") != "" {
				t.Fatalf("fragment = %v, want an error about the unverified email", frag)
			}
		})
	}
	if got := f.authMethods(admin, adaID); got != "[internal]" {
		t.Fatalf("auth_methods = %s, want [internal]: an unverified address was linked", got)
	}
	if _, total, err := f.users.Users(context.Background(), 10, 0); err != nil || total != 2 {
		t.Fatalf("%d users (%v), want 2: an unverified address created one", total, err)
	}
	// Once the provider vouches for the address, the login is linked.
	access := tokens(t, f.signIn(oidctest.User{Subject: "att-2", Email: "ada@example.com", EmailVerified: true}))
	if me := f.as(access, "GET", "/api/auth/me", nil).expect(200).object(); me["user_id"] != adaID {
		t.Fatalf("verified login: me = %v, want %s", me, adaID)
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
	if loc := f.submitLogin(f.browser, "pw@example.com", "wrong"); loc != "" {
		t.Fatalf("a wrong password at the provider redirected to %q", loc)
	}
}
