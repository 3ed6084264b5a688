// Package oidctest runs a real OpenID Provider for tests: zitadel's op
// package with its example in-memory storage, one web client, users added
// by the test and a plain login form at the provider.
// A test helper under api/auth: it must not import store, app or runners.
package oidctest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The client the provider knows, and the path of its login form.
const (
	ClientID     = "appliance"
	ClientSecret = "appliance-client-secret"
	LoginPath    = "/login/username"
)

// User is an identity at the provider.
type User struct {
	Subject       string
	Email         string
	EmailVerified bool
	// NoEmailVerified leaves email_verified out of the ID token, as some
	// providers do, rather than saying false.
	NoEmailVerified bool
	Name            string
	Password        string
}

// Provider is a running OpenID Provider on 127.0.0.1.
type Provider struct {
	server *httptest.Server

	mu       sync.Mutex
	users    map[string]*storage.User // by subject
	added    []string                 // subjects, latest last
	silent   map[string]bool          // subjects without email_verified
	audience string                   // client the ID tokens are for, if not ours
	lifetime time.Duration            // ID token lifetime
	nonce    *string                  // nonce of the ID tokens, if not the login's
}

// Start runs a provider whose client may redirect to redirectURIs.
func Start(t testing.TB, redirectURIs ...string) *Provider {
	t.Helper()
	p := &Provider{users: map[string]*storage.User{}, silent: map[string]bool{}, lifetime: time.Hour}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("oidc provider listen: %v", err)
	}
	p.server = httptest.NewUnstartedServer(nil)
	p.server.Listener.Close()
	p.server.Listener = ln
	issuer := "http://" + ln.Addr().String()

	client := storage.WebClient(ClientID, ClientSecret, redirectURIs...)
	store := &providerStorage{
		Storage: storage.NewStorageWithClients(userStore{p}, map[string]*storage.Client{ClientID: client}),
		p:       p,
		client:  client,
	}
	key := sha256.Sum256([]byte("oidctest"))
	provider, err := op.NewOpenIDProvider(issuer, &op.Config{
		CryptoKey:             key,
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
		SupportedUILocales:    []language.Tag{language.English},
	}, store, op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("oidc provider: %v", err)
	}
	callback := op.AuthCallbackURL(provider)
	mux := http.NewServeMux()
	mux.Handle(LoginPath, op.NewIssuerInterceptor(provider.IssuerFromRequest).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			id := r.FormValue("id")
			if err := store.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id); err != nil {
				w.WriteHeader(http.StatusUnauthorized)
				loginForm.Execute(w, map[string]string{"ID": id, "Error": err.Error()})
				return
			}
			http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
			return
		}
		loginForm.Execute(w, map[string]string{"ID": r.FormValue("authRequestID")})
	})))
	mux.Handle("/", provider)
	p.server.Config.Handler = mux
	p.server.Start()
	t.Cleanup(p.server.Close)
	return p
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test identity provider</title></head><body>
<h1>Sign in at the identity provider</h1>
{{if .Error}}<p id="idp-error">{{.Error}}</p>{{end}}
<form method="post" action="` + LoginPath + `">
<input type="hidden" name="id" value="{{.ID}}">
<label>User <input id="idp-username" name="username"></label>
<label>Password <input id="idp-password" name="password" type="password"></label>
<button id="idp-submit" type="submit">Sign in</button>
</form></body></html>`))

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.server.URL }

// AddUser adds (or replaces) an identity; its login name is its email,
// which signs in as the latest identity added with it.
func (p *Provider) AddUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.added = append(slices.DeleteFunc(p.added, func(s string) bool { return s == u.Subject }), u.Subject)
	p.users[u.Subject] = &storage.User{
		ID: u.Subject, Username: u.Email, Password: u.Password,
		FirstName: u.Name, Email: u.Email, EmailVerified: u.EmailVerified && !u.NoEmailVerified,
		PreferredLanguage: language.English,
	}
	p.silent[u.Subject] = u.NoEmailVerified
}

// SetAudience makes the next ID tokens be issued for another client, as a
// misconfigured provider would ("" restores ours).
func (p *Provider) SetAudience(aud string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.audience = aud
}

// SetIDTokenLifetime sets the lifetime of the next ID tokens (negative:
// already expired when issued).
func (p *Provider) SetIDTokenLifetime(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lifetime = d
}

// SetNonce makes the next ID tokens carry nonce instead of the nonce their
// login sent ("" leaves the claim out), as a provider that ignores the
// parameter, or a token issued for another login, would.
func (p *Provider) SetNonce(nonce string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonce = &nonce
}

// EchoNonce restores the default: ID tokens carry their login's nonce.
func (p *Provider) EchoNonce() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonce = nil
}

// userStore gives the example storage the test's users.
type userStore struct{ p *Provider }

func (s userStore) GetUserByID(id string) *storage.User {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.p.users[id]
}

func (s userStore) GetUserByUsername(name string) *storage.User {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	for _, sub := range slices.Backward(s.p.added) {
		if u := s.p.users[sub]; u.Username == name {
			return u
		}
	}
	return nil
}

func (userStore) ExampleClientID() string { return "service" }

// providerStorage is the example storage with the test's knobs: claims in
// the ID token, its lifetime, audience and nonce, and an explicit
// email_verified: false (the example omits false) unless the user has none.
type providerStorage struct {
	*storage.Storage
	p      *Provider
	client *storage.Client
}

func (s *providerStorage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id != ClientID {
		return nil, fmt.Errorf("client %q not found", id)
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return testClient{Client: s.client, lifetime: s.p.lifetime, id: s.p.audience}, nil
}

func (s *providerStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	req, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return nil, err
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.audience != "" {
		req = audienceRequest{AuthRequest: req, clientID: s.p.audience}
	}
	if s.p.nonce != nil {
		req = nonceRequest{AuthRequest: req, nonce: *s.p.nonce}
	}
	return req, nil
}

func (s *providerStorage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, info, req, scopes); err != nil {
		return err
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if u := s.p.users[req.GetSubject()]; u != nil && !u.EmailVerified && !s.p.silent[u.ID] {
		info.AppendClaims("email_verified", false)
	}
	return nil
}

// testClient puts the user's claims in the ID token, as most providers
// do, and has the test's ID token lifetime.
type testClient struct {
	*storage.Client
	lifetime time.Duration
	id       string // another client's id, for tokens of another audience
}

func (c testClient) GetID() string {
	if c.id != "" {
		return c.id
	}
	return c.Client.GetID()
}

func (c testClient) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c testClient) IDTokenLifetime() time.Duration       { return c.lifetime }

// audienceRequest is an authorization that the provider took for
// another client: its ID token's aud and azp name that client.
type audienceRequest struct {
	op.AuthRequest
	clientID string
}

func (r audienceRequest) GetClientID() string   { return r.clientID }
func (r audienceRequest) GetAudience() []string { return []string{r.clientID} }

// nonceRequest is an authorization whose ID token carries another nonce.
type nonceRequest struct {
	op.AuthRequest
	nonce string
}

func (r nonceRequest) GetNonce() string { return r.nonce }
