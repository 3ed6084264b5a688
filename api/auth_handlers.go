package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
)

var errBadCredentials = echo.NewHTTPError(http.StatusUnauthorized, "invalid email or password")

// tokenPair is the body of login and refresh.
type tokenPair struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

type loginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// login checks a password. Its limits (loginGuard) come first: a refused
// attempt costs no hash.
func (s *server) login(c echo.Context) error {
	if !s.auth.hasInternal() {
		return notFound("password login (no internal provider is configured)")
	}
	var req loginRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	email := strings.TrimSpace(req.Email)
	if email == "" || req.Password == "" {
		return badRequest("email and password are required")
	}
	attempt, err := s.auth.admitLogin(c, email)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	u, err := s.auth.users.UserByEmail(ctx, email)
	if err != nil && !errors.Is(err, accounts.ErrUserNotFound) {
		return err
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	release, err := s.auth.guard.hashSlot(ctx)
	if err != nil {
		return err
	}
	if hash == "" {
		// No such user, or one who signs in only through OIDC: spend the
		// time a real check takes, then refuse with the same message.
		hash = s.auth.dummyPasswordHash()
		u = nil
	}
	ok, err := verifyPassword(hash, req.Password)
	release()
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	if !ok || u == nil {
		return errBadCredentials
	}
	if err := s.auth.loginSucceeded(c, attempt); err != nil {
		return err
	}
	pair, err := s.auth.issueTokens(ctx, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pair)
}

// admitLogin passes a password check of the account email names through
// the login limits (loginGuard), with the device cookie the request
// carries for that account.
func (a *authService) admitLogin(c echo.Context, email string) (*loginAttempt, error) {
	account := accountKey(email)
	return a.guard.admitLogin(clientAddress(c), account, a.devices.device(c.Request(), account))
}

// loginSucceeded ends an attempt whose password was right: its budget is
// given back and its client gets a new device cookie for the account.
func (a *authService) loginSucceeded(c echo.Context, at *loginAttempt) error {
	a.guard.loginSucceeded(at)
	value, err := a.devices.issue(at.account)
	if err != nil {
		return fmt.Errorf("issue a device cookie: %w", err)
	}
	c.SetCookie(a.devices.cookie(c.Request(), value, a.cfg.BaseURL))
	return nil
}

func (a *authService) hasInternal() bool {
	for _, p := range a.cfg.Providers {
		if p.Type == ProviderInternal {
			return true
		}
	}
	return false
}

func (a *authService) dummyPasswordHash() string {
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
// refresh token, stored, and an access token under it.
func (a *authService) issueTokens(ctx context.Context, u *User) (*tokenPair, error) {
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
	return &tokenPair{AccessToken: access, RefreshToken: refresh}, nil
}

type refreshRequest struct {
	RefreshToken string `json:"refresh_token"`
}

func decodeRefreshToken(c echo.Context) (string, error) {
	var req refreshRequest
	if err := decodeJSON(c, &req); err != nil {
		return "", err
	}
	if req.RefreshToken == "" {
		return "", badRequest("refresh_token is required")
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
func (s *server) refresh(c echo.Context) error {
	token, err := decodeRefreshToken(c)
	if err != nil {
		return err
	}
	if err := s.auth.guard.admitToken(clientAddress(c)); err != nil {
		return err
	}
	ctx := c.Request().Context()
	next, stored, err := s.auth.newRefreshToken("", "")
	if err != nil {
		return err
	}
	old, err := s.auth.users.RotateRefreshToken(ctx, s.auth.refreshHash(token), stored, s.auth.now())
	switch {
	case errors.Is(err, accounts.ErrTokenReused):
		s.log.Warn("refresh token reused: login revoked", "user", old.UserID, "login", old.FamilyID(), "address", c.RealIP())
		s.auth.revocations.changed(old.UserID)
		return errReusedRefresh
	case errors.Is(err, accounts.ErrRefreshTokenNotFound):
		return errBadRefresh
	case err != nil:
		return err
	}
	u, err := s.auth.users.User(ctx, old.UserID)
	if errors.Is(err, accounts.ErrUserNotFound) {
		return errBadRefresh
	}
	if err != nil {
		return err
	}
	access, err := s.auth.issueAccessToken(u, stored.Family)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tokenPair{AccessToken: access, RefreshToken: next})
}

// logout revokes the login a refresh token belongs to: the token, every
// other token of its family, and with them its access tokens. An unknown
// token is already as revoked as it can be, so the answer is the same.
func (s *server) logout(c echo.Context) error {
	token, err := decodeRefreshToken(c)
	if err != nil {
		return err
	}
	if err := s.auth.guard.admitToken(clientAddress(c)); err != nil {
		return err
	}
	userID, err := s.auth.users.RevokeRefreshFamily(c.Request().Context(), s.auth.refreshHash(token))
	if err != nil {
		return err
	}
	s.auth.revocations.changed(userID)
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// meView is GET /api/auth/me.
type meView struct {
	UserID    string    `json:"user_id"`
	Name      *string   `json:"name"`
	Email     string    `json:"email"`
	IsAdmin   bool      `json:"is_admin"`
	Groups    []string  `json:"groups"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *server) me(c echo.Context) error {
	u := caller(c).user
	return c.JSON(http.StatusOK, meView{
		UserID: u.ID, Name: u.Name, Email: u.Email, IsAdmin: u.IsAdmin,
		Groups: nonNil(u.Groups), CreatedAt: u.CreatedAt.UTC(),
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
