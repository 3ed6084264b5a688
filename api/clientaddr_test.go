package api_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
)

// proxyDialingFrom is a real reverse proxy on 127.0.0.1 in front of
// target, connecting to it from the loopback address from. forwarded picks
// its header: X-Forwarded-For appended to (as nginx's
// proxy_add_x_forwarded_for does), or a Forwarded element appended.
func proxyDialingFrom(t *testing.T, target, from string, forwarded bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	p := &httputil.ReverseProxy{Transport: &http.Transport{DialContext: dialer.DialContext}}
	if forwarded {
		p.Rewrite = func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			host, _, _ := net.SplitHostPort(pr.In.RemoteAddr)
			pr.Out.Header.Set("Forwarded", strings.Join(append(pr.In.Header.Values("Forwarded"), fmt.Sprintf("for=%q;proto=http", host)), ", "))
		}
	} else {
		// A Director appends the peer to the X-Forwarded-For it got.
		p.Director = httputil.NewSingleHostReverseProxy(u).Director
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// via returns the fixture reaching the server through url.
func (f *authFixture) via(url string) *authFixture {
	c := *f
	fc := *f.fixture
	fc.url = url
	c.fixture = &fc
	return &c
}

func trustedProxies(cidrs ...string) fixtureOption {
	return func(c *fixtureConfig) {
		for _, s := range cidrs {
			c.TrustedProxies = append(c.TrustedProxies, netip.MustParsePrefix(s))
		}
	}
}

// TestLoginLimitsBehindTrustedProxy: behind a reverse proxy every client
// connects from the proxy's address. An attacker failing logins for the
// admin through it, after the admin signed in through it, gets the account
// limited (the proxy's address is no exemption), the admin's device cookie
// still signs them in, and the per-address limit counts the address the
// proxy saw, not the proxy's.
func TestLoginLimitsBehindTrustedProxy(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 3, Per: time.Minute},
		PerAddress: auth.Rate{Events: 6, Per: time.Minute},
	}, trustedProxies("127.0.0.1/32"))
	f.addUser("admin@example.com", "right", true)
	proxied := f.via(proxyDialingFrom(t, f.url, "127.0.0.1", false))
	admin, attacker := proxied.from("127.0.0.3"), proxied.from("127.0.0.2")

	device := admin.loginAs("admin@example.com", "right", nil).expect(200).deviceCookie()
	for range 3 {
		attacker.loginAs("admin@example.com", "guess", nil).expect(401)
	}
	attacker.loginAs("admin@example.com", "guess", nil).expectError(429, "for this account")
	attacker.loginAs("admin@example.com", "right", nil).expectError(429, "for this account")
	admin.loginAs("admin@example.com", "right", nil).expectError(429, "for this account")
	admin.loginAs("admin@example.com", "right", withDevice(device)).expect(200)

	// The attacker's address has spent 5 of its 6 attempts (refused ones
	// count), the admin's 3, though both come from the proxy.
	attacker.loginAs("someone@example.com", "guess", nil).expect(401)
	attacker.loginAs("someone-else@example.com", "guess", nil).expectError(429, "from this address")
	admin.loginAs("someone-else@example.com", "guess", nil).expect(401)

	// A client that reaches the server directly (not from a trusted
	// proxy) forging X-Forwarded-For is judged by its socket address: a
	// fresh forged address per attempt buys nothing.
	direct := f.from("127.0.0.4")
	for i := range 6 {
		direct.loginAs(fmt.Sprintf("direct%d@example.com", i), "guess", map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}).expect(401)
	}
	direct.loginAs("nobody@example.com", "guess", map[string]string{
		"X-Forwarded-For": "198.51.100.99", "Forwarded": "for=198.51.100.99", "X-Real-IP": "198.51.100.99",
	}).expectError(429, "from this address")
	// Through the proxy, a forged X-Forwarded-For stands left of the
	// address the proxy appends, and is never read.
	forger := proxied.from("127.0.0.6")
	for i := range 6 {
		forger.loginAs(fmt.Sprintf("forger%d@example.com", i), "guess", map[string]string{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i)}).expect(401)
	}
	forger.loginAs("nobody@example.com", "guess", map[string]string{"X-Forwarded-For": "198.51.100.99"}).expectError(429, "from this address")
}

// TestForwardedHeaderReadRightToLeftPastTrustedHops: two proxies in a row,
// each appending a Forwarded element; the server reads right to left past
// both (trusted) and stops at the client, never reaching what the client
// wrote itself.
func TestForwardedHeaderReadRightToLeftPastTrustedHops(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 100, Per: time.Minute},
		PerAddress: auth.Rate{Events: 3, Per: time.Minute},
	}, trustedProxies("127.0.0.1/32", "127.0.0.5/32"))
	inner := proxyDialingFrom(t, f.url, "127.0.0.1", true)
	outer := proxyDialingFrom(t, inner, "127.0.0.5", true)
	proxied := f.via(outer)
	attacker, other := proxied.from("127.0.0.2"), proxied.from("127.0.0.3")

	// The server gets `for=<forged>, for="127.0.0.2", for="127.0.0.5"`.
	for i := range 3 {
		attacker.loginAs("nobody@example.com", "guess", map[string]string{"Forwarded": fmt.Sprintf("for=198.51.100.%d", i)}).expect(401)
	}
	attacker.loginAs("nobody@example.com", "guess", map[string]string{"Forwarded": "for=198.51.100.99"}).expectError(429, "from this address")
	// Another client behind the same two proxies has its own budget.
	other.loginAs("nobody@example.com", "guess", nil).expect(401)
}
