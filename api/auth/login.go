package auth

import (
	"errors"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
)

var errBadCredentials = echo.NewHTTPError(http.StatusUnauthorized, "invalid email or password")

// login checks a password. Its limits (loginGuard) come first: a refused
// attempt costs no hash.
func (a *Service) login(c echo.Context) error {
	if !a.HasInternal() {
		return httpx.NotFound("password login (no internal provider is configured)")
	}
	var req wire.LoginRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	email := strings.TrimSpace(req.Email)
	if email == "" || req.Password == "" {
		return httpx.BadRequest("email and password are required")
	}
	failed := func(reason string) {
		e := Entry(c)
		e.Actor, e.Source = audit.Actor{Email: email}, audit.SourceUser
		e.Action, e.Outcome, e.Reason = audit.SignIn, audit.Failed, reason
		a.record(e)
	}
	attempt, err := a.admitLogin(c, email)
	if err != nil {
		failed("refused by the login limits")
		return err
	}
	ctx := c.Request().Context()
	u, err := a.users.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, accounts.ErrUserNotFound) {
		return err
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	release, err := a.guard.hashSlot(ctx)
	if err != nil {
		return err
	}
	if hash == "" {
		// No such user, or one who signs in only through OIDC: spend the
		// time a real check takes, then refuse with the same message.
		hash = a.dummyPasswordHash()
		u = nil
	}
	ok, err := verifyPassword(hash, req.Password)
	release()
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if !ok || u == nil {
		failed("invalid email or password")
		return errBadCredentials
	}
	if err := a.loginSucceeded(c, attempt); err != nil {
		return err
	}
	pair, err := a.issueTokens(c, u, "password")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pair)
}

// admitLogin passes a password check of the account email names through
// the login limits (loginGuard), with the device cookie the request
// carries for that account.
func (a *Service) admitLogin(c echo.Context, email string) (*loginAttempt, error) {
	account := accountKey(email)
	return a.guard.admitLogin(clientAddress(c), account, a.devices.device(c.Request(), account))
}

// loginSucceeded ends an attempt whose password was right: its budget is
// given back and its client gets a new device cookie for the account.
func (a *Service) loginSucceeded(c echo.Context, at *loginAttempt) error {
	a.guard.loginSucceeded(at)
	value, err := a.devices.issue(at.account)
	if err != nil {
		return fmt.Errorf("issue a device cookie: %w", err)
	}
	c.SetCookie(a.devices.cookie(c.Request(), value, a.cfg.BaseURL))
	return nil
}

func (a *Service) dummyPasswordHash() string {
	a.dummyOnce.Do(func() {
		h, err := HashPassword("appliance timing equaliser")
		if err != nil {
			a.log.Error("hash dummy password", "err", err)
		}
		a.dummyHash = h
	})
	return a.dummyHash
}

// issueTokens starts a login of u: a new refresh token family, its first
// refresh token, stored with the sign-in's audit entry, and an access
// token under it. how names the way u proved who they are.
func (a *Service) issueTokens(c echo.Context, u *User, how string) (*wire.TokenPair, error) {
	e := Entry(c)
	e.Actor, e.Source = audit.Actor{ID: u.ID, Email: u.Email}, audit.SourceUser
	e.At, e.Action, e.Target, e.Outcome, e.Reason = a.now(), audit.SignIn, "user/"+u.ID, audit.OK, how
	ctx := audit.WithEntry(c.Request().Context(), e)
	family, err := newFamilyID()
	if err != nil {
		return nil, err
	}
	refresh, stored, err := a.newRefreshToken(u.ID, family)
	if err != nil {
		return nil, err
	}
	if err := a.users.PutRefreshToken(ctx, stored); err != nil {
		return nil, err
	}
	access, err := a.issueAccessToken(u, family)
	if err != nil {
		return nil, err
	}
	return &wire.TokenPair{AccessToken: access, RefreshToken: refresh}, nil
}

func decodeRefreshToken(c echo.Context) (string, error) {
	var req wire.RefreshRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return "", err
	}
	if req.RefreshToken == "" {
		return "", httpx.BadRequest("refresh_token is required")
	}
	return req.RefreshToken, nil
}

var (
	errBadRefresh    = echo.NewHTTPError(http.StatusUnauthorized, "invalid or expired refresh token")
	errReusedRefresh = echo.NewHTTPError(http.StatusUnauthorized,
		"refresh token was already used, so a copy of it may be stolen: every token of this login is revoked; sign in again")
)

// refresh rotates a refresh token: the old one is marked rotated in the
// same transaction that stores the new one, so each token works once. A
// second use of a token means two parties hold it (DESIGN.md "Refresh
// tokens"): the whole login is revoked, the thief's chain with the owner's.
func (a *Service) refresh(c echo.Context) error {
	token, err := decodeRefreshToken(c)
	if err != nil {
		return err
	}
	if err := a.guard.admitToken(clientAddress(c)); err != nil {
		return err
	}
	ctx := c.Request().Context()
	next, stored, err := a.newRefreshToken("", "")
	if err != nil {
		return err
	}
	old, err := a.users.RotateRefreshToken(ctx, a.refreshHash(token), stored, a.now())
	switch {
	case errors.Is(err, accounts.ErrTokenReused):
		a.log.Warn("refresh token reused: login revoked", "user", old.UserID, "login", old.FamilyID(), "address", c.RealIP())
		e := Entry(c)
		e.Actor, e.Source = audit.Actor{ID: old.UserID}, audit.SourceUser
		e.Action, e.Target, e.Outcome = audit.SignIn, "user/"+old.UserID, audit.Failed
		e.Reason = "a refresh token was used twice: its login is revoked"
		a.record(e)
		a.revocations.changed(old.UserID)
		return errReusedRefresh
	case errors.Is(err, accounts.ErrRefreshTokenNotFound):
		return errBadRefresh
	case err != nil:
		return err
	}
	u, err := a.users.User(ctx, old.UserID)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return errBadRefresh
	}
	if err != nil {
		return err
	}
	access, err := a.issueAccessToken(u, stored.Family)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.TokenPair{AccessToken: access, RefreshToken: next})
}

// logout revokes the login a refresh token belongs to: the token, every
// other token of its family, and with them its access tokens. An unknown
// token is already as revoked as it can be, so the answer is the same.
func (a *Service) logout(c echo.Context) error {
	token, err := decodeRefreshToken(c)
	if err != nil {
		return err
	}
	if err := a.guard.admitToken(clientAddress(c)); err != nil {
		return err
	}
	// The store names the token's user in the entry (audit.ForUser).
	ctx := a.auditedAs(c, audit.SourceUser, audit.SignOut)
	userID, err := a.users.RevokeRefreshFamily(ctx, a.refreshHash(token))
	if err != nil {
		return err
	}
	a.revocations.changed(userID)
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: "ok"})
}

// me is GET /api/auth/me.
func (a *Service) me(c echo.Context) error {
	u := Caller(c).User
	return c.JSON(http.StatusOK, wire.Me{
		UserID: u.ID, Name: u.Name, Email: u.Email, IsAdmin: u.IsAdmin,
		Groups: httpx.NonNil(u.Groups), CreatedAt: u.CreatedAt.UTC(),
	})
}
