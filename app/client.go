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
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string // bearer token; empty = none sent
	http  *http.Client
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

// header is what every request carries.
func (c *apiClient) header() http.Header {
	h := http.Header{}
	if c.token != "" {
		h.Set("Authorization", "Bearer "+c.token)
	}
	return h
}

// send makes one request with an optional JSON body and returns the raw
// JSON answer of a 2xx; any other status is an *apiError.
func (c *apiClient) send(ctx context.Context, method, path string, body any) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header = c.header()
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, errorOfAnswer(resp.StatusCode, raw)
	}
	return raw, nil
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
