package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
)

// loginAs posts a login; the caller checks the answer.
func (f *authFixture) loginAs(email, password string, header map[string]string) response {
	f.t.Helper()
	return f.do("POST", "/api/auth/login", map[string]string{"email": email, "password": password}, header)
}

// expectRetryLater checks a 429 or 503 with a JSON error and a
// Retry-After of want seconds ("" = any).
func (r response) expectRetryLater(status int, want string) {
	r.t.Helper()
	r.expect(status)
	r.errorMessage()
	got := r.header.Get("Retry-After")
	if got == "" || (want != "" && got != want) {
		r.t.Fatalf("Retry-After = %q, want %q", got, want)
	}
}

func TestLoginLimitPerAccountStopsGuessing(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 3, Per: time.Minute},
		PerAddress: auth.Rate{Events: 100, Per: time.Minute},
	})
	f.addUser("ada@example.com", "right", false)
	f.addUser("bob@example.com", "bobs", false)
	stranger := f.from("127.0.0.2")
	for range 3 {
		stranger.loginAs("ada@example.com", "guess", nil).expect(401)
	}
	// The 4th attempt, in any letter case, is refused before its hash is
	// computed: one event per 20 s refills.
	stranger.loginAs(" ADA@example.com", "guess", nil).expectRetryLater(429, "20")
	// A client that never signed in to the account (no device cookie)
	// waits even with the right password: the limit cannot tell the owner
	// from a lucky guess.
	f.from("127.0.0.3").loginAs("ada@example.com", "right", nil).expectRetryLater(429, "20")
	// Another account from another address is unaffected.
	f.from("127.0.0.4").loginAs("bob@example.com", "bobs", nil).expect(200)

	f.clock.Advance(20 * time.Second)
	f.from("127.0.0.3").loginAs("ada@example.com", "right", nil).expect(200)
}

// deviceCookie is the device cookie a login answer sets.
func (r response) deviceCookie() string {
	r.t.Helper()
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "appliance_device" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/api/auth/" || c.MaxAge <= 0 {
				r.t.Fatalf("device cookie %q: want HttpOnly, SameSite=Strict, Path=/api/auth/ and a Max-Age", c.String())
			}
			return c.Value
		}
	}
	r.t.Fatalf("no device cookie in %v", r.header.Values("Set-Cookie"))
	return ""
}

func withDevice(cookie string) map[string]string {
	return map[string]string{"Cookie": "appliance_device=" + cookie}
}

// TestStrangerCannotLockOwnerOut: the account limit counts the failures of
// every client without a device cookie, whatever its address (the owner's
// own included), and a success gives the budget back; a client with the
// account's device cookie has a budget of its own, so spending the
// account's locks out only those who never signed in.
func TestStrangerCannotLockOwnerOut(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 3, Per: time.Minute},
		PerAddress: auth.Rate{Events: 100, Per: time.Minute},
	})
	f.addUser("ada@example.com", "right", false)
	owner, stranger := f, f.from("127.0.0.2")
	device := owner.loginAs("ada@example.com", "right", nil).expect(200).deviceCookie()

	for range 3 {
		stranger.loginAs("ada@example.com", "guess", nil).expect(401)
	}
	stranger.loginAs("ada@example.com", "right", nil).expectRetryLater(429, "")
	// The address the owner signed in from is no exemption: behind a
	// proxy, that address is everyone's.
	owner.loginAs("ada@example.com", "right", nil).expectRetryLater(429, "")
	// The cookie is: with it the owner signs in, and gets a new one.
	next := owner.loginAs("ada@example.com", "right", withDevice(device)).expect(200).deviceCookie()
	if next == device {
		t.Fatal("a login with a device cookie did not renew it")
	}
	// From any address (a laptop that moved), the old and the new alike.
	f.from("127.0.0.5").loginAs("ada@example.com", "right", withDevice(next)).expect(200)
	owner.loginAs("ada@example.com", "right", withDevice(device)).expect(200)
	// The stranger is still limited.
	stranger.loginAs("ada@example.com", "guess", nil).expectRetryLater(429, "")

	// A device has a failure budget of its own: a stolen cookie gives
	// three guesses more, then counts as no cookie (the account's budget,
	// spent).
	for range 3 {
		stranger.loginAs("ada@example.com", "guess", withDevice(next)).expect(401)
	}
	stranger.loginAs("ada@example.com", "guess", withDevice(next)).expectRetryLater(429, "")
	owner.loginAs("ada@example.com", "right", withDevice(next)).expectRetryLater(429, "")
	owner.loginAs("ada@example.com", "right", withDevice(device)).expect(200)

	// A success without a cookie gives the account its whole budget back.
	f.clock.Advance(time.Minute)
	other := f.from("127.0.0.3")
	for range 2 {
		other.loginAs("ada@example.com", "typo", nil).expect(401)
	}
	f.from("127.0.0.4").loginAs("ada@example.com", "right", nil).expect(200)
	for range 3 {
		other.loginAs("ada@example.com", "typo", nil).expect(401)
	}
	other.loginAs("ada@example.com", "typo", nil).expectRetryLater(429, "")
}

// TestDeviceCookieOfAnotherAccountOrTamperedDoesNotExempt: the cookie is
// bound to the account it was issued for, and its signature to the
// server's key.
func TestDeviceCookieOfAnotherAccountOrTamperedDoesNotExempt(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 3, Per: time.Minute},
		PerAddress: auth.Rate{Events: 100, Per: time.Minute},
	})
	f.addUser("ada@example.com", "right", true)
	f.addUser("mallory@example.com", "mine", false)
	adas := f.loginAs("ada@example.com", "right", nil).expect(200).deviceCookie()
	mallorys := f.from("127.0.0.2").loginAs("mallory@example.com", "mine", nil).expect(200).deviceCookie()
	attacker := f.from("127.0.0.2")
	for range 3 {
		attacker.loginAs("ada@example.com", "guess", nil).expect(401)
	}

	nonce, mac, _ := strings.Cut(adas, ".")
	flip := func(s string) string { // another valid base64url character
		if s[0] == 'A' {
			return "B" + s[1:]
		}
		return "A" + s[1:]
	}
	for name, cookie := range map[string]string{
		"another account's":  mallorys,
		"tampered nonce":     flip(nonce) + "." + mac,
		"tampered signature": nonce + "." + flip(mac),
		"signature only":     "." + mac,
		"nonce only":         nonce,
		"garbage":            "x.y",
	} {
		if r := attacker.loginAs("ada@example.com", "right", withDevice(cookie)); r.status != 429 {
			t.Fatalf("with %s cookie: %d %s, want 429", name, r.status, r.body)
		}
	}
	f.loginAs("ada@example.com", "right", withDevice(adas)).expect(200)
	// Mallory's own cookie still serves Mallory.
	attacker.loginAs("mallory@example.com", "mine", withDevice(mallorys)).expect(200)
}

func TestLoginLimitPerAddress(t *testing.T) {
	f := newAuthFixtureWith(t, nil, auth.LoginLimits{
		PerAccount: auth.Rate{Events: 100, Per: time.Minute},
		PerAddress: auth.Rate{Events: 5, Per: time.Minute},
	})
	f.addUser("bob@example.com", "bobs", false)
	// Distinct accounts do not help a single address.
	for i := range 5 {
		f.loginAs(fmt.Sprintf("user%d@example.com", i), "guess", nil).expect(401)
	}
	f.loginAs("user5@example.com", "guess", nil).expectRetryLater(429, "12")
	// Nor does claiming another address: the key is the connection's.
	f.loginAs("user6@example.com", "guess", map[string]string{"X-Forwarded-For": "203.0.113.9", "X-Real-IP": "203.0.113.9"}).expectRetryLater(429, "12")
	f.loginAs("bob@example.com", "bobs", nil).expectRetryLater(429, "12")
	// Another account from another address is unaffected.
	f.from("127.0.0.2").loginAs("bob@example.com", "bobs", nil).expect(200)

	// Refresh and logout have their own budget per address: spent logins
	// leave them alone, and a flood of them is limited too.
	bad := map[string]string{"refresh_token": "not-a-token"}
	for range 5 {
		f.api("POST", "/api/auth/refresh", bad).expect(401)
	}
	f.api("POST", "/api/auth/refresh", bad).expectRetryLater(429, "12")
	f.api("POST", "/api/auth/logout", bad).expectRetryLater(429, "12")

	f.clock.Advance(12 * time.Second)
	f.loginAs("bob@example.com", "bobs", nil).expect(200)
}

func refreshPair(f *authFixture, refresh string) (access, next string) {
	f.t.Helper()
	m := f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": refresh}).expect(200).object()
	access, next = m["access_token"].(string), m["refresh_token"].(string)
	if access == "" || next == "" || next == refresh {
		f.t.Fatalf("refresh returned %v", m)
	}
	return access, next
}

func TestRefreshChainRotates(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	first, refresh := f.login("ada@example.com", "pw")
	for range 20 {
		var access string
		access, refresh = refreshPair(f, refresh)
		f.as(access, "GET", "/api/auth/me", nil).expect(200)
		f.clock.Advance(10 * time.Minute)
	}
	// Earlier access tokens of the live login stay valid until they expire.
	f.clock.Advance(-200 * time.Minute)
	f.as(first, "GET", "/api/auth/me", nil).expect(200)
}

func TestReusedRefreshTokenRevokesTheLogin(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access0, a := f.login("ada@example.com", "pw")
	otherAccess, otherRefresh := f.login("ada@example.com", "pw") // another device
	access1, b := refreshPair(f, a)
	access2, c := refreshPair(f, b) // derived from B by refresh

	// A was rotated: presenting it again means two parties hold it.
	f.from("127.0.0.2").api("POST", "/api/auth/refresh", map[string]string{"refresh_token": a}).expectError(401, "already used")
	for name, tok := range map[string]string{"B": b, "C": c, "A again": a} {
		r := f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": tok})
		if r.status != 401 {
			t.Fatalf("refresh with %s after reuse: %d %s, want 401", name, r.status, r.body)
		}
	}
	for name, tok := range map[string]string{"access0": access0, "access1": access1, "access2": access2} {
		if r := f.as(tok, "GET", "/api/auth/me", nil); r.status != 401 {
			t.Fatalf("%s after reuse: %d, want 401", name, r.status)
		}
	}
	// The user's other login is untouched.
	f.as(otherAccess, "GET", "/api/auth/me", nil).expect(200)
	refreshPair(f, otherRefresh)
}

func TestLogoutRevokesTheLogin(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access0, a := f.login("ada@example.com", "pw")
	otherAccess, _ := f.login("ada@example.com", "pw")
	access1, b := refreshPair(f, a)
	f.api("POST", "/api/auth/logout", map[string]string{"refresh_token": b}).expect(200)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": b}).expectError(401, "refresh token")
	f.as(access1, "GET", "/api/auth/me", nil).expect(401)
	f.as(access0, "GET", "/api/auth/me", nil).expect(401)
	f.as(otherAccess, "GET", "/api/auth/me", nil).expect(200)
}
