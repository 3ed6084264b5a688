// Package client is a typed Go client of the server's public HTTP API: its
// answers are the api/wire types the handlers encode, and a failed call is
// an *Error with the API's status and its {"error"} message. The CLI
// (app/cli) is built on it.
// It must not import echo, api, api/auth or api/dispatch: a client sees only
// the wire.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api/wire"
)

// RequestTimeout bounds one ordinary API call; streams are bounded by
// their context instead.
const RequestTimeout = time.Minute

// Client calls one server's public API.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string // a fixed bearer token; empty = none sent
	creds Credentials
	hint  string
	http  *http.Client
}

// Credentials gives a client its bearer token per request and renews it
// when the server answers 401 (a stored login whose access token expires).
type Credentials interface {
	// Token is the bearer token of the next request ("" = none).
	Token(ctx context.Context) string
	// Refresh renews the token stale was; an error means the 401 stands.
	Refresh(ctx context.Context, stale string) (string, error)
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends this bearer token with every request (unless
// WithCredentials gives another source).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithCredentials takes each request's token from creds and renews it once
// on a 401.
func WithCredentials(creds Credentials) Option { return func(c *Client) { c.creds = creds } }

// WithHTTPClient makes the calls with h (default: one with RequestTimeout).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithLoginHint adds hint, in parentheses, to the message of every 401: what
// the user can do about it.
func WithLoginHint(hint string) Option { return func(c *Client) { c.hint = hint } }

// New is a client of the server at baseURL (scheme://host[:port][/prefix]).
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: RequestTimeout}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// BaseURL is the server's URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Token is the fixed token of WithToken ("" = none).
func (c *Client) Token() string { return c.token }

// Error is an error answer of the server: its status and the text of its
// {"error": ...} body, and the login hint of a 401.
type Error struct {
	Status  int
	Message string
	Hint    string
}

func (e *Error) Error() string {
	if e.Hint != "" {
		return e.Message + " (" + e.Hint + ")"
	}
	return e.Message
}

// UnreachableError means no connection could be made at all, which is
// nearly always a server that is not running or a wrong URL.
type UnreachableError struct {
	URL string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the server at %s (is it running? set --server or APPLIANCE_SERVER)", e.URL)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Header is what a request with this bearer token carries.
func Header(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// Bearer is the token of the next request (renewed first when a stored
// login's is about to expire): the MCP bridge sends it on its own requests.
func (c *Client) Bearer(ctx context.Context) string { return c.bearer(ctx) }

// bearer is the token of the next request.
func (c *Client) bearer(ctx context.Context) string {
	if c.creds != nil {
		return c.creds.Token(ctx)
	}
	return c.token
}

// Send makes one request with an optional JSON body and returns the raw
// JSON answer of a 2xx; any other status is an *Error. A 401 with
// credentials renews the token and tries once more.
//
// A 503 with Retry-After (a failover between two replicas, a server
// starting) is sent again after the pause it asks for, for at most
// RetryBudget; nothing else is retried, so a request whose answer was
// lost midway is not repeated blindly (execute carries an
// Idempotency-Key for that).
func (c *Client) Send(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	return c.send(ctx, method, path, body, nil)
}

// RetryBudget bounds how long a request answered 503 with Retry-After is
// retried: a failover takes the lease plus a renew interval (12 s by
// default).
const RetryBudget = 30 * time.Second

func (c *Client) send(ctx context.Context, method, path string, body any, extra http.Header) (json.RawMessage, error) {
	token := c.bearer(ctx)
	raw, status, err := c.doRetrying(ctx, method, path, body, token, extra)
	if status == http.StatusUnauthorized && c.creds != nil {
		if fresh, rerr := c.creds.Refresh(ctx, token); rerr == nil {
			raw, status, err = c.doRetrying(ctx, method, path, body, fresh, extra)
		}
	}
	if status == http.StatusUnauthorized {
		return nil, c.withHint(err)
	}
	return raw, err
}

// doRetrying is Do, again after each 503 with Retry-After, within RetryBudget.
func (c *Client) doRetrying(ctx context.Context, method, path string, body any, token string, extra http.Header) (json.RawMessage, int, error) {
	deadline := time.Now().Add(RetryBudget)
	for {
		raw, h, status, err := c.Do(ctx, method, path, body, token, extra)
		pause, ok := retryAfter(status, h)
		if !ok || time.Now().Add(pause).After(deadline) {
			return raw, status, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return raw, status, err
		case <-t.C:
		}
	}
}

// retryAfter reads the pause a 503 asks for (Retry-After in seconds,
// at most 5 s: a failover's end is noticed promptly).
func retryAfter(status int, h http.Header) (time.Duration, bool) {
	if status != http.StatusServiceUnavailable {
		return 0, false
	}
	secs, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After")))
	if err != nil || secs < 0 {
		return 0, false
	}
	return min(time.Duration(secs)*time.Second, 5*time.Second), true
}

// withHint adds the login hint to a 401's *Error.
func (c *Client) withHint(err error) error {
	var ae *Error
	if c.hint == "" || !errors.As(err, &ae) {
		return err
	}
	return &Error{Status: ae.Status, Message: ae.Message, Hint: c.hint}
}

// Do makes one request with the given bearer token and further request
// headers, and returns the raw answer of a 2xx (any other status is an
// *Error), the answer's headers and its status. It neither renews the
// token nor adds the login hint: the sign-in calls use it.
func (c *Client) Do(ctx context.Context, method, path string, body any, token string, extra http.Header) (json.RawMessage, http.Header, int, error) {
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
	req.Header = Header(token)
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
		return nil, resp.Header, resp.StatusCode, ErrorOfAnswer(resp.StatusCode, raw)
	}
	return raw, resp.Header, resp.StatusCode, nil
}

// Get fetches path and decodes its JSON answer into out (nil: not
// decoded), returning the raw answer too.
func (c *Client) Get(ctx context.Context, path string, out any) (json.RawMessage, error) {
	raw, err := c.Send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if err := Decode(raw, out); err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	return raw, nil
}

// Post sends body to path and decodes the JSON answer into out (nil: not
// decoded), returning the raw answer too.
func (c *Client) Post(ctx context.Context, path string, body, out any) (json.RawMessage, error) {
	raw, err := c.Send(ctx, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	if err := Decode(raw, out); err != nil {
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return raw, nil
}

// Decode decodes a raw answer into out (nil: nothing to do).
func Decode(raw []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("unexpected answer %.200q: %w", raw, err)
	}
	return nil
}

// ErrorOfAnswer turns a non-2xx answer into an *Error, with the server's
// own words when the body is the API's {"error": ...}.
func ErrorOfAnswer(status int, body []byte) error {
	var e wire.Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &Error{Status: status, Message: e.Error}
	}
	msg := fmt.Sprintf("server answered %d %s", status, http.StatusText(status))
	if text := strings.TrimSpace(string(body)); text != "" {
		msg += fmt.Sprintf(": %.200s", text)
	}
	return &Error{Status: status, Message: msg}
}

// transportError names an unreachable server plainly; other failures
// (a reset connection, a timeout) keep their detail.
func (c *Client) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return &UnreachableError{URL: c.base, Err: err}
	}
	return fmt.Errorf("call the server at %s: %w", c.base, err)
}
