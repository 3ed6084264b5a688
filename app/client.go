package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// defaultServerURL is where the client commands look when neither
// --server nor APPLIANCE_SERVER says otherwise: the address `serve` uses
// with no configuration.
const defaultServerURL = "http://127.0.0.1:8080"

// requestTimeout bounds one ordinary API call; streams are bounded by
// their context instead.
const requestTimeout = time.Minute

// apiClient calls the server's public HTTP API for the client commands.
type apiClient struct {
	base    string // scheme://host[:port][/prefix], no trailing slash
	token   string // bearer token (APPLIANCE_TOKEN); empty = none sent
	session *session
	http    *http.Client
}

// refreshMargin is how long before its expiry an access token is renewed,
// so a request does not leave with a token that dies on the way.
const refreshMargin = 30 * time.Second

// session is the stored login of `appliance login` for this server: the
// client sends its token and renews it when it expires.
type session struct {
	store  *credentialStore
	server string
	mu     sync.Mutex
	login  storedLogin
}

// bearer is the token of the next request: APPLIANCE_TOKEN, the API key,
// or the access token, renewed first when it is about to expire.
func (c *apiClient) bearer(ctx context.Context) string {
	if c.session == nil {
		return c.token
	}
	c.session.mu.Lock()
	login := c.session.login
	c.session.mu.Unlock()
	if login.APIKey == "" && login.RefreshToken != "" {
		if exp, ok := tokenExpiry(login.AccessToken); ok && time.Until(exp) < refreshMargin {
			// A failed renewal leaves the old token: the server's 401
			// then tells the user what to do.
			if fresh, err := c.refresh(ctx, login.AccessToken); err == nil {
				return fresh
			}
		}
	}
	return login.bearer()
}

// refresh renews the access token that stale was, under the credentials
// lock: when another command renewed it meanwhile, its tokens are used,
// since the refresh token works once. It returns the new access token.
func (c *apiClient) refresh(ctx context.Context, stale string) (string, error) {
	s := c.session
	if s == nil || s.login.RefreshToken == "" {
		return "", errors.New("no refresh token")
	}
	var fresh storedLogin
	err := s.store.update(s.server, func(cur storedLogin, ok bool) (*storedLogin, error) {
		if !ok {
			return nil, errors.New("logged out")
		}
		if cur.AccessToken != stale && cur.AccessToken != "" {
			fresh = cur
			return &cur, nil
		}
		var pair struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		}
		raw, _, err := c.roundTrip(ctx, http.MethodPost, "/api/auth/refresh", map[string]string{"refresh_token": cur.RefreshToken}, "")
		if err != nil {
			return nil, err
		}
		if err := decodeAnswer(raw, &pair); err != nil || pair.AccessToken == "" {
			return nil, fmt.Errorf("refresh the access token: unexpected answer %.200q", raw)
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

func newAPIClient(base, token string) *apiClient {
	return &apiClient{
		base:  strings.TrimRight(base, "/"),
		token: token,
		http:  &http.Client{Timeout: requestTimeout},
	}
}

// apiError is an error answer of the server: its status and the text of
// its {"error": ...} body.
type apiError struct {
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Message }

// unreachableError means no connection could be made at all, which is
// nearly always a server that is not running or a wrong --server.
type unreachableError struct {
	url string
	err error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach the server at %s (is it running? set --server or APPLIANCE_SERVER)", e.url)
}

func (e *unreachableError) Unwrap() error { return e.err }

// header is what a request with this bearer token carries.
func header(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// send makes one request with an optional JSON body and returns the raw
// JSON answer of a 2xx; any other status is an *apiError. A 401 with a
// stored login renews the access token and tries once more.
func (c *apiClient) send(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	token := c.bearer(ctx)
	raw, status, err := c.roundTrip(ctx, method, path, body, token)
	if status == http.StatusUnauthorized && c.session != nil && c.session.login.APIKey == "" {
		if fresh, rerr := c.refresh(ctx, token); rerr == nil {
			raw, status, err = c.roundTrip(ctx, method, path, body, fresh)
		}
	}
	if status == http.StatusUnauthorized {
		return nil, c.loginHint(err)
	}
	return raw, err
}

// loginHint adds to a 401 what the user can do about it.
func (c *apiClient) loginHint(err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	hint := `run "appliance login --server ` + c.base + `"`
	if c.token != "" {
		hint = `check APPLIANCE_TOKEN, or unset it and ` + hint
	}
	return &apiError{Status: ae.Status, Message: ae.Message + " (" + hint + ")"}
}

// roundTrip makes one request with the given bearer token and returns the
// raw answer of a 2xx, and the status.
func (c *apiClient) roundTrip(ctx context.Context, method, path string, body any, token string) (json.RawMessage, int, error) {
	raw, _, status, err := c.exchange(ctx, method, path, body, token, nil)
	return raw, status, err
}

// exchange is roundTrip with further request headers, returning the
// answer's headers too.
func (c *apiClient) exchange(ctx context.Context, method, path string, body any, token string, extra http.Header) (json.RawMessage, http.Header, int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("build request: %w", err)
	}
	req.Header = header(token)
	for k, v := range extra {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, 0, c.transportError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.Header, resp.StatusCode, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, resp.Header, resp.StatusCode, errorOfAnswer(resp.StatusCode, raw)
	}
	return raw, resp.Header, resp.StatusCode, nil
}

// get fetches path and decodes its JSON answer into out, returning the
// raw answer too for --json.
func (c *apiClient) get(ctx context.Context, path string, out any) (json.RawMessage, error) {
	raw, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := decodeAnswer(raw, out); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return raw, nil
}

// post sends body to path and decodes the JSON answer into out.
func (c *apiClient) post(ctx context.Context, path string, body, out any) (json.RawMessage, error) {
	raw, err := c.send(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if err := decodeAnswer(raw, out); err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return raw, nil
}

func decodeAnswer(raw []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("unexpected answer %.200q: %w", raw, err)
	}
	return nil
}

// errorOfAnswer turns a non-2xx answer into an *apiError, with the
// server's own words when the body is the API's {"error": ...}.
func errorOfAnswer(status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &apiError{Status: status, Message: e.Error}
	}
	msg := fmt.Sprintf("server answered %d %s", status, http.StatusText(status))
	if text := strings.TrimSpace(string(body)); text != "" {
		msg += fmt.Sprintf(": %.200s", text)
	}
	return &apiError{Status: status, Message: msg}
}

// transportError names an unreachable server plainly; other failures
// (a reset connection, a timeout) keep their detail.
func (c *apiClient) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &unreachableError{url: c.base, err: err}
	}
	return fmt.Errorf("call the server at %s: %w", c.base, err)
}
