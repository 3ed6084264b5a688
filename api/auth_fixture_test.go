package api_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/openapitest"
	"github.com/appliance-sh/appliance/store"
)

// Secrets of the auth fixtures.
var (
	testJWTSecret     = []byte("test-jwt-secret-0123456789abcdef0123")
	testRefreshSecret = []byte("test-refresh-secret-0123456789abcdef")
)

// testClock is the auth clock, moved by hand to expire tokens and keys.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// authFixture is the API fixture with auth on: users in their own bbolt
// file, and a clock for token lifetimes.
type authFixture struct {
	*fixture
	users *store.DB
	clock *testClock
	cfg   *auth.Config
}

// newAuthFixture starts a server with an internal provider plus the given
// ones.
func newAuthFixture(t *testing.T, extra map[string]auth.Provider) *authFixture {
	t.Helper()
	return newAuthFixtureWith(t, extra, auth.LoginLimits{})
}

// newAuthFixtureWith starts a server as newAuthFixture does, with the
// given login limits and fixture options.
func newAuthFixtureWith(t *testing.T, extra map[string]auth.Provider, logins auth.LoginLimits, opts ...fixtureOption) *authFixture {
	t.Helper()
	users, err := store.Open(filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatalf("users store: %v", err)
	}
	t.Cleanup(func() { users.Close() })
	clock := &testClock{now: time.Now().UTC().Truncate(time.Second)}
	providers := map[string]auth.Provider{"local": {Type: auth.ProviderInternal}}
	for id, p := range extra {
		providers[id] = p
	}
	cfg := &auth.Config{
		JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
		Providers: providers, Now: clock.Now, Logins: logins,
	}
	f := newFixture(t, append([]fixtureOption{func(c *fixtureConfig) { c.Auth, c.Users = cfg, users }}, opts...)...)
	return &authFixture{fixture: f, users: users, clock: clock, cfg: cfg}
}

// in returns the fixture reporting to another test, for subtests.
func (f *authFixture) in(t *testing.T) *authFixture {
	c := *f
	c.fixture = f.fixture.in(t)
	return &c
}

// from returns the fixture calling from another loopback address (any of
// 127.0.0.0/8 reaches the server), as another client would.
func (f *authFixture) from(ip string) *authFixture {
	c := *f
	fc := *f.fixture
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	fc.client = &http.Client{Timeout: f.client.Timeout, Transport: openapitest.Transport(&http.Transport{DialContext: dialer.DialContext})}
	c.fixture = &fc
	return &c
}

// addUser stores a user with a password and returns its id.
func (f *authFixture) addUser(email, password string, admin bool) string {
	f.t.Helper()
	hash, err := auth.HashPassword(password)
	if err != nil {
		f.t.Fatal(err)
	}
	u := &auth.User{ID: uuid.NewString(), Email: email, PasswordHash: hash, IsAdmin: admin, Groups: []string{}, CreatedAt: f.clock.Now()}
	if err := f.users.CreateUser(context.Background(), u); err != nil {
		f.t.Fatalf("create user %s: %v", email, err)
	}
	return u.ID
}

// login returns the access and refresh tokens of a password login.
func (f *authFixture) login(email, password string) (access, refresh string) {
	f.t.Helper()
	m := f.api("POST", "/api/auth/login", map[string]string{"email": email, "password": password}).expect(200).object()
	access, _ = m["access_token"].(string)
	refresh, _ = m["refresh_token"].(string)
	if access == "" || refresh == "" {
		f.t.Fatalf("login returned %v", m)
	}
	return access, refresh
}

// as calls an endpoint with a bearer token.
func (f *authFixture) as(token, method, path string, body any) response {
	f.t.Helper()
	return f.do(method, path, body, map[string]string{"Authorization": "Bearer " + token})
}
