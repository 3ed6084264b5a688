package auth

import (
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// User management (DESIGN.md "User management"): admins create users,
// reset passwords and delete users; every user changes their own password.

// minPasswordLen is the shortest password a user may be given, in
// characters.
const minPasswordLen = 12

// checkEmail accepts a bare address (no display name, no angle brackets).
func checkEmail(email string) error {
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return httpx.BadRequest("email %q is not an email address (like ada@example.com)", email)
	}
	return nil
}

func checkPassword(field, password string) error {
	if n := utf8.RuneCountInString(password); n < minPasswordLen {
		return httpx.BadRequest("%s is too short: %d characters, at least %d", field, n, minPasswordLen)
	}
	return nil
}

func checkGroups(groups []string) error {
	for _, g := range groups {
		if !groupName.MatchString(g) {
			return httpx.BadRequest("invalid group name %q: use 1 to 64 letters, digits, _ or -", g)
		}
	}
	return nil
}

// createUser is POST /api/users: 201 with the user; 409 when the email is
// taken.
func (a *Service) createUser(c echo.Context) error {
	var req wire.CreateUserRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	email := strings.TrimSpace(req.Email)
	if email == "" {
		return httpx.BadRequest(`"email" is required`)
	}
	if err := checkEmail(email); err != nil {
		return err
	}
	if err := checkPassword("password", req.Password); err != nil {
		return err
	}
	groups := []string{}
	if req.Groups != nil {
		if err := checkGroups(*req.Groups); err != nil {
			return err
		}
		groups = slices.Compact(slices.Sorted(slices.Values(*req.Groups)))
	}
	if req.Name != nil && strings.TrimSpace(*req.Name) == "" {
		req.Name = nil
	}
	hash, err := HashPassword(req.Password)
	if err != nil {
		return err
	}
	u := &User{
		ID: uuid.NewString(), Email: email, Name: req.Name, PasswordHash: hash,
		IsAdmin: req.IsAdmin, Groups: groups, CreatedAt: a.now().UTC(),
	}
	if err := a.users.CreateUser(a.audited(c, audit.UserCreate, "user/"+u.ID, u.Email), u); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, userOf(u))
}

// setPassword is PUT /api/users/{id}/password: an admin sets a user's
// password. Every credential of that user ends with it (their refresh
// tokens and API keys are revoked, their open streams end): a reset is
// for a forgotten or leaked password.
func (a *Service) setPassword(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	var req wire.PasswordRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if err := checkPassword("password", req.Password); err != nil {
		return err
	}
	hash, err := HashPassword(req.Password)
	if err != nil {
		return err
	}
	keep := ""
	if p := Caller(c); p.User.ID == id {
		keep = p.family // an admin resetting their own keeps this login
	}
	u, err := a.users.SetPassword(a.audited(c, audit.UserPassword, "user/"+id, ""), id, hash, keep, true)
	if err != nil {
		return err
	}
	a.revocations.changed(id)
	return c.JSON(http.StatusOK, userOf(u))
}

// deleteUser is DELETE /api/users/{id}: the user, their refresh tokens
// and API keys go in one transaction. An admin cannot delete themself.
func (a *Service) deleteUser(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	if id == Caller(c).User.ID {
		return httpx.BadRequest("you cannot delete your own account; ask another admin")
	}
	if err := a.users.DeleteUser(a.audited(c, audit.UserDelete, "user/"+id, ""), id); err != nil {
		return err
	}
	a.revocations.changed(id)
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: "deleted"})
}

// changeOwnPassword is PUT /api/auth/me/password: any user, with their
// current password. Their other logins end; the one making the change
// stays (an API key has no login, so all end). Their API keys end too
// unless revoke_api_keys is false.
func (a *Service) changeOwnPassword(c echo.Context) error {
	p := Caller(c)
	var req wire.OwnPasswordRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.CurrentPassword == nil {
		return httpx.BadRequest(`"current_password" is required`)
	}
	if err := checkPassword("password", req.Password); err != nil {
		return err
	}
	ctx := c.Request().Context()
	// Guessing the current password here is a login attempt like any
	// other: the same limits apply, and a refused attempt costs no hash.
	attempt, err := a.admitLogin(c, p.User.Email)
	if err != nil {
		return err
	}
	release, err := a.guard.hashSlot(ctx)
	if err != nil {
		return err
	}
	ok := false
	if p.User.PasswordHash != "" {
		ok, err = verifyPassword(p.User.PasswordHash, *req.CurrentPassword)
	}
	release()
	if err != nil {
		return err
	}
	if !ok {
		return httpx.BadRequest("current_password is wrong (a user who signs in only through single sign-on has none: ask an admin to set one)")
	}
	if err := a.loginSucceeded(c, attempt); err != nil {
		return err
	}
	hash, err := HashPassword(req.Password)
	if err != nil {
		return err
	}
	revokeKeys := req.RevokeAPIKeys == nil || *req.RevokeAPIKeys
	if _, err := a.users.SetPassword(a.audited(c, audit.UserPassword, "user/"+p.User.ID, "own"), p.User.ID, hash, p.family, revokeKeys); err != nil {
		return err
	}
	a.revocations.changed(p.User.ID)
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: "ok"})
}
