package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/appliance-sh/appliance/api/wire"
)

// DeviceCookieName is the cookie a password login sets to prove, at the
// next login, that this client signed in to the account before: failed
// logins of strangers then do not lock it out.
const DeviceCookieName = "appliance_device"

// As is a copy of c that sends token ("" = none) with every request and
// renews nothing: a call with credentials other than c's own, such as an
// API key being checked before it is stored.
func (c *Client) As(token string) *Client {
	cp := *c
	cp.token, cp.creds = token, nil
	return &cp
}

// Login signs in with a password (POST /api/auth/login), carrying the
// device cookie device ("" = none). It returns the tokens and the device
// cookie the server set ("" = none). It sends no bearer token; an error
// answer is an *Error (404: the server has no password sign-in, 401: the
// email or password is wrong).
func (c *Client) Login(ctx context.Context, req wire.LoginRequest, device string) (*wire.TokenPair, string, error) {
	var cookie http.Header
	if device != "" {
		cookie = http.Header{"Cookie": {(&http.Cookie{Name: DeviceCookieName, Value: device}).String()}}
	}
	raw, answer, _, err := c.Do(ctx, http.MethodPost, "/api/auth/login", req, "", cookie)
	if err != nil {
		return nil, "", err
	}
	var pair wire.TokenPair
	if err := Decode(raw, &pair); err != nil || pair.AccessToken == "" {
		return nil, "", fmt.Errorf("log in: unexpected answer %.200q", raw)
	}
	next := ""
	for _, ck := range (&http.Response{Header: answer}).Cookies() {
		if ck.Name == DeviceCookieName {
			next = ck.Value
		}
	}
	return &pair, next, nil
}

// Refresh trades a refresh token for a new pair (POST /api/auth/refresh);
// the old refresh token works no more. It sends no bearer token.
func (c *Client) Refresh(ctx context.Context, refreshToken string) (*wire.TokenPair, error) {
	raw, _, _, err := c.Do(ctx, http.MethodPost, "/api/auth/refresh", wire.RefreshRequest{RefreshToken: refreshToken}, "", nil)
	if err != nil {
		return nil, err
	}
	var pair wire.TokenPair
	if err := Decode(raw, &pair); err != nil || pair.AccessToken == "" {
		return nil, fmt.Errorf("refresh the access token: unexpected answer %.200q", raw)
	}
	return &pair, nil
}

// Logout revokes the login a refresh token belongs to
// (POST /api/auth/logout). It sends no bearer token.
func (c *Client) Logout(ctx context.Context, refreshToken string) error {
	_, _, _, err := c.Do(ctx, http.MethodPost, "/api/auth/logout", wire.RefreshRequest{RefreshToken: refreshToken}, "", nil)
	return err
}

// Me is the caller (GET /api/auth/me).
func (c *Client) Me(ctx context.Context) (*wire.Me, json.RawMessage, error) {
	raw, err := c.Send(ctx, http.MethodGet, "/api/auth/me", nil)
	if err != nil {
		return nil, nil, err
	}
	var me wire.Me
	if err := Decode(raw, &me); err != nil {
		return nil, nil, err
	}
	return &me, raw, nil
}

// CreateAPIKey issues an API key to the caller (POST /api/auth/api-keys);
// the answer is the only one that holds the raw key. The server refuses a
// caller signed in with an API key.
func (c *Client) CreateAPIKey(ctx context.Context, req wire.CreateAPIKeyRequest) (*wire.APIKeyCreated, json.RawMessage, error) {
	var created wire.APIKeyCreated
	raw, err := c.Post(ctx, "/api/auth/api-keys", req, &created)
	if err != nil {
		return nil, nil, err
	}
	return &created, raw, nil
}

// APIKeys lists the caller's API keys, without their secrets
// (GET /api/auth/api-keys).
func (c *Client) APIKeys(ctx context.Context) ([]wire.APIKey, json.RawMessage, error) {
	var keys []wire.APIKey
	raw, err := c.Get(ctx, "/api/auth/api-keys", &keys)
	return keys, raw, err
}

// DeleteAPIKey revokes the caller's API key of this prefix
// (DELETE /api/auth/api-keys/{prefix}).
func (c *Client) DeleteAPIKey(ctx context.Context, prefix string) (*wire.StatusAnswer, json.RawMessage, error) {
	path := "/api/auth/api-keys/" + url.PathEscape(prefix)
	raw, err := c.Send(ctx, http.MethodDelete, path, nil)
	if err != nil {
		return nil, nil, err
	}
	var answer wire.StatusAnswer
	if err := Decode(raw, &answer); err != nil {
		return nil, nil, fmt.Errorf("DELETE %s: %w", path, err)
	}
	return &answer, raw, nil
}
