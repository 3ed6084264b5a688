package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/appliance-sh/appliance/api/auth/oidctest"
	"github.com/appliance-sh/appliance/app/cli"
	"github.com/appliance-sh/appliance/app/config"
)

// The sign-in pages of the UI in headless Chromium against an auth-on
// server: password, OIDC through a real provider, renewal before expiry
// and sign-out.

// localStorage reads a key of the page's storage.
func (b *browser) localStorage(key string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem(`+jsString(key)+`) || ''`))
	if err != nil {
		b.t.Fatalf("read localStorage %s: %v", key, err)
	}
	return v
}

func jsString(s string) string {
	return "'" + s + "'" // keys here are plain
}

func TestBrowserSignsInWithAPasswordRenewsBeforeExpiryAndSignsOut(t *testing.T) {
	b := newBrowser(t)
	s := startAuthServer(t, func(c *config.Server) { c.Auth.AccessTokenTTL = "3s" })

	b.do("open the UI and land on the login page",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
	)
	b.do("sign in with a wrong password",
		chromedp.SetValue(chromedp.CSS(`#login-email`), "admin@example.com"),
		chromedp.SetValue(chromedp.CSS(`#login-password`), "not-the-password"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		pageText("Wrong email or password."),
	)
	b.do("sign in",
		chromedp.SetValue(chromedp.CSS(`#login-password`), "first-password"),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/main/hello"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#user-menu summary`)),
	)
	b.screenshot("signed-in")

	// The page renews its access token before it expires, without a
	// request having to fail first.
	first := b.localStorage("appliance.access_token")
	exp, ok := cli.TokenExpiry(first)
	if !ok {
		t.Fatalf("stored access token %q has no expiry", first)
	}
	var renewedAt time.Time
	waitUntil(t, "the page to renew its access token", func() bool {
		if b.localStorage("appliance.access_token") != first {
			renewedAt = time.Now()
			return true
		}
		return false
	})
	if !renewedAt.Before(exp) {
		t.Fatalf("renewed at %s, after the token expired at %s", renewedAt.Format(time.StampMilli), exp.Format(time.StampMilli))
	}
	// Several lifetimes later the session still works.
	second := b.localStorage("appliance.access_token")
	exp2, _ := cli.TokenExpiry(second)
	waitUntil(t, "the renewed token's lifetime to pass", func() bool { return time.Now().After(exp2.Add(time.Second)) })
	b.do("browse after several renewals",
		chromedp.Click(chromedp.CSS(`header nav a[href="/jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
	)
	if path, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname`)); err != nil || path != "/jobs" {
		t.Fatalf("after renewals the page is at %q (%v), want /jobs", path, err)
	}

	refresh := b.localStorage("appliance.refresh_token")
	b.do("sign out",
		chromedp.Click(chromedp.CSS(`#user-menu summary`)),
		chromedp.Click(chromedp.CSS(`#sign-out`)),
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
	)
	if b.localStorage("appliance.access_token") != "" || b.localStorage("appliance.refresh_token") != "" {
		t.Fatal("tokens are still stored after sign-out")
	}
	waitUntil(t, "sign-out to revoke the refresh token", func() bool { return s.refreshStatus(refresh) == 401 })
}

func TestBrowserSignsInThroughAnOIDCProvider(t *testing.T) {
	b := newBrowser(t)
	addr := freePort(t)
	base := "http://" + addr
	idp := oidctest.Start(t, base+"/api/auth/oidc/idp/callback")
	idp.AddUser(oidctest.User{Subject: "sub-grace", Email: "grace@example.com", EmailVerified: true, Name: "Grace", Password: "idp-pw"})
	idp.AddUser(oidctest.User{Subject: "sub-mallory", Email: "admin@example.com", EmailVerified: false, Password: "idp-pw"})
	s := startAuthServer(t, func(c *config.Server) {
		c.Listen = addr
		c.Auth.BaseURL = base
		c.Auth.Providers["idp"] = config.AuthProvider{
			ProviderType: "oidc", DisplayName: "Test IdP",
			IssuerURL: idp.Issuer(), ClientID: oidctest.ClientID, ClientSecret: oidctest.ClientSecret,
		}
	})

	signInAtProvider := func(user string) {
		b.do("go to the provider from the login page",
			chromedp.Navigate(s.url+"/login"),
			chromedp.WaitVisible(chromedp.CSS(`a[href="/api/auth/oidc/idp"]`)),
			pageText("Sign in with Test IdP"),
			chromedp.Click(chromedp.CSS(`a[href="/api/auth/oidc/idp"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#idp-username`)),
		)
		b.do("sign in at the provider as "+user,
			chromedp.SetValue(chromedp.CSS(`#idp-username`), user),
			chromedp.SetValue(chromedp.CSS(`#idp-password`), "idp-pw"),
			chromedp.Click(chromedp.CSS(`#idp-submit`)),
		)
	}

	// An address the provider has not verified cannot take over the
	// admin's account: the login page says why.
	signInAtProvider("admin@example.com")
	b.do("see the refusal on the login page",
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
		pageText("not verified"),
	)
	if b.localStorage("appliance.access_token") != "" {
		t.Fatal("a refused OIDC login stored a token")
	}

	signInAtProvider("grace@example.com")
	b.do("land on the dashboard",
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/main/hello"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#user-menu summary`)),
	)
	b.screenshot("signed-in-through-oidc")
	if path, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname + location.hash`)); err != nil || path != "/" {
		t.Fatalf("after the callback the page is at %q (%v); the tokens must leave the address bar", path, err)
	}
	me := map[string]any{}
	if code := doAuth(t, "GET", s.url+"/api/auth/me", b.localStorage("appliance.access_token"), &me); code != 200 || me["email"] != "grace@example.com" {
		t.Fatalf("me with the page's token: %d %v", code, me)
	}
}
