package auth

import (
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/labstack/echo/v4"
)

// defaultUserPageLimit is the spec's page size of GET /api/users.
const defaultUserPageLimit = 20

// groupName is the spec's group name rule.
var groupName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// userOf is u as the admin endpoints show it.
func userOf(u *User) wire.User {
	methods := []string{}
	if u.PasswordHash != "" {
		methods = append(methods, ProviderInternal)
	}
	for _, p := range u.OIDCProviders {
		methods = append(methods, "oidc:"+p)
	}
	return wire.User{
		ID: u.ID, Email: u.Email, Name: u.Name, IsAdmin: u.IsAdmin,
		Groups: httpx.NonNil(u.Groups), AuthMethods: methods, CreatedAt: u.CreatedAt.UTC(),
	}
}

func (a *Service) listUsers(c echo.Context) error {
	limit, offset, err := httpx.Page(c)
	if err != nil {
		return err
	}
	if c.QueryParam("limit") == "" {
		limit = defaultUserPageLimit
	}
	users, total, err := a.users.Users(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	out := wire.List[wire.User]{Items: make([]wire.User, len(users)), Total: total}
	for i, u := range users {
		out.Items[i] = userOf(u)
	}
	return c.JSON(http.StatusOK, out)
}

// userIDParam returns the `id` path parameter; ids are UUIDs, so anything
// else is a 404 without a lookup.
func userIDParam(c echo.Context) (string, error) {
	id := c.Param("id")
	if !httpx.IsUUID(id) {
		return "", httpx.NotFound("user %q", id)
	}
	return id, nil
}

func (a *Service) getUser(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	u, err := a.users.User(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userOf(u))
}

func (a *Service) setAdmin(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	var req wire.SetAdminRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.IsAdmin == nil {
		return httpx.BadRequest(`"is_admin" (true or false) is required`)
	}
	// Refusing self-revocation keeps at least the caller an admin, so the
	// server cannot lose its last admin by a slip.
	if id == Caller(c).User.ID && !*req.IsAdmin {
		return httpx.BadRequest("you cannot revoke your own admin status; ask another admin")
	}
	u, err := a.users.SetAdmin(a.audited(c, audit.UserUpdate, "user/"+id, fmt.Sprintf("is_admin %v", *req.IsAdmin)), id, *req.IsAdmin)
	if err != nil {
		return err
	}
	a.revocations.changed(id) // what their streams show may change
	return c.JSON(http.StatusOK, wire.AdminAnswer{IsAdmin: u.IsAdmin})
}

func (a *Service) setGroups(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	var req wire.SetGroupsRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.Groups == nil {
		return httpx.BadRequest(`"groups" (an array of group names) is required`)
	}
	for _, g := range *req.Groups {
		if !groupName.MatchString(g) {
			return httpx.BadRequest("invalid group name %q: use 1 to 64 letters, digits, _ or -", g)
		}
	}
	u, err := a.users.SetGroups(a.audited(c, audit.UserUpdate, "user/"+id, "groups "+strings.Join(*req.Groups, ",")), id, slices.Clone(*req.Groups))
	if err != nil {
		return err
	}
	a.revocations.changed(id) // what their streams show may change
	return c.JSON(http.StatusOK, wire.GroupsAnswer{Groups: httpx.NonNil(u.Groups)})
}

func (a *Service) listGroups(c echo.Context) error {
	groups, err := a.users.Groups(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.GroupsAnswer{Groups: httpx.NonNil(groups)})
}
