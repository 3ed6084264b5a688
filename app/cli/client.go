package cli

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/api/client"
)

// defaultServerURL is where the client commands look when neither
// --server nor APPLIANCE_SERVER says otherwise: the address `serve` uses
// with no configuration.
const defaultServerURL = "http://127.0.0.1:8080"

// refreshMargin is how long before its expiry an access token is renewed,
// so a request does not leave with a token that dies on the way.
const refreshMargin = 30 * time.Second

// session is the stored login of `appliance login` for this server: the
// client sends its token and renews it when it expires.
type session struct {
	c      *client.Client
	store  *CredentialStore
	server string
	mu     sync.Mutex
	login  StoredLogin
}

// Token is the token of the next request: the API key, or the access
// token, renewed first when it is about to expire.
func (s *session) Token(ctx context.Context) string {
	s.mu.Lock()
	login := s.login
	s.mu.Unlock()
	if login.APIKey == "" && login.RefreshToken != "" {
		if exp, ok := TokenExpiry(login.AccessToken); ok && time.Until(exp) < refreshMargin {
			// A failed renewal leaves the old token: the server's 401
			// then tells the user what to do.
			if fresh, err := s.Refresh(ctx, login.AccessToken); err == nil {
				return fresh
			}
		}
	}
	return login.bearer()
}

// Refresh renews the access token that stale was, under the credentials
// lock: when another command renewed it meanwhile, its tokens are used,
// since the refresh token works once. It returns the new access token. An
// API key is not renewed.
func (s *session) Refresh(ctx context.Context, stale string) (string, error) {
	s.mu.Lock()
	login := s.login
	s.mu.Unlock()
	if login.APIKey != "" || login.RefreshToken == "" {
		return "", errors.New("no refresh token")
	}
	var fresh StoredLogin
	err := s.store.update(s.server, func(cur StoredLogin, ok bool) (*StoredLogin, error) {
		if !ok {
			return nil, errors.New("logged out")
		}
		if cur.AccessToken != stale && cur.AccessToken != "" {
			fresh = cur
			return &cur, nil
		}
		pair, err := s.c.Refresh(ctx, cur.RefreshToken)
		if err != nil {
			return nil, err
		}
		cur.AccessToken, cur.RefreshToken = pair.AccessToken, pair.RefreshToken
		fresh = cur
		return &cur, nil
	})
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.login = fresh
	s.mu.Unlock()
	return fresh.AccessToken, nil
}

// loginHint is what a 401 tells the user to do.
func loginHint(base, token string) string {
	hint := `run "appliance login --server ` + base + `"`
	if token != "" {
		hint = `check APPLIANCE_TOKEN, or unset it and ` + hint
	}
	return hint
}

// newAPIClient is the client of the server at base with this token
// (APPLIANCE_TOKEN; "" = none) and no stored login.
func newAPIClient(base, token string) *client.Client {
	return client.New(base, client.WithToken(token), client.WithLoginHint(loginHint(base, token)))
}
