package auth

import (
	"errors"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
)

// Bounds of API key requests.
const (
	maxAPIKeyNameLen  = 200
	maxAPIKeyDays     = 36500
	apiKeyPrefixTries = 20
)

// createAPIKey issues a key to the caller. Only an access token may do so
// (403 for a caller using an API key), so a leaked key cannot mint more.
func (a *Service) createAPIKey(c echo.Context) error {
	p := Caller(c)
	if p.keyHash != "" {
		return echo.NewHTTPError(http.StatusForbidden, "api keys can only be created with an access token (log in), not with an api key")
	}
	var req wire.CreateAPIKeyRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		return httpx.BadRequest("name is required and must not be empty")
	}
	if len(name) > maxAPIKeyNameLen {
		return httpx.BadRequest("name is too long (%d characters, at most %d)", len(name), maxAPIKeyNameLen)
	}
	scopes, err := accounts.ParseScopes(req.Scopes)
	if err != nil {
		return httpx.BadRequest("scopes: %v", err)
	}
	now := a.now()
	var expires *time.Time
	if req.ExpiresInDays != nil {
		days := *req.ExpiresInDays
		if days < 1 || days > maxAPIKeyDays {
			return httpx.BadRequest("expires_in_days must be between 1 and %d, or null for a key that never expires; got %d", maxAPIKeyDays, days)
		}
		t := now.Add(time.Duration(days) * 24 * time.Hour).UTC()
		expires = &t
	}
	// Prefixes are short, so two keys of one user may share one; draw again.
	for range apiKeyPrefixTries {
		key, err := newAPIKey()
		if err != nil {
			return err
		}
		rec := &APIKey{
			Hash: apiKeyHash(key), Prefix: key[:apiKeyShownLen], Name: name,
			UserID: p.User.ID, CreatedAt: now.UTC(), ExpiresAt: expires, Scopes: scopes,
		}
		err = a.users.CreateAPIKey(a.audited(c, audit.KeyCreate, "api_key/"+rec.Prefix, "name "+name), rec)
		if errors.Is(err, accounts.ErrAPIKeyPrefixTaken) {
			continue
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, wire.APIKeyCreated{Key: key, Name: name, Prefix: rec.Prefix, ExpiresAt: expires, Scopes: scopeList(scopes)})
	}
	return echo.NewHTTPError(http.StatusConflict, "too many api keys: no free key prefix left; revoke unused keys")
}

func (a *Service) listAPIKeys(c echo.Context) error {
	keys, err := a.users.APIKeys(c.Request().Context(), Caller(c).User.ID)
	if err != nil {
		return err
	}
	out := make([]wire.APIKey, len(keys))
	for i, k := range keys {
		out[i] = wire.APIKey{Prefix: k.Prefix, Name: k.Name, CreatedAt: k.CreatedAt.UTC(), ExpiresAt: httpx.UTCPtr(k.ExpiresAt), LastUsedAt: httpx.UTCPtr(k.LastUsedAt), Scopes: scopeList(k.Scopes)}
	}
	return c.JSON(http.StatusOK, out)
}

// deleteAPIKey revokes one of the caller's keys; someone else's key is a
// 404 like a missing one, so prefixes of other users cannot be probed.
func (a *Service) deleteAPIKey(c echo.Context) error {
	userID := Caller(c).User.ID
	if err := a.users.DeleteAPIKey(a.audited(c, audit.KeyRevoke, "api_key/"+c.Param("prefix"), ""), userID, c.Param("prefix")); err != nil {
		return err
	}
	a.revocations.changed(userID)
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: "revoked"})
}

// scopeList is a key's scopes as answers show them: every scope for a key
// without any (it may do all its user may).
func scopeList(scopes []accounts.Scope) []string {
	if len(scopes) == 0 {
		scopes = accounts.AllScopes
	}
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}
