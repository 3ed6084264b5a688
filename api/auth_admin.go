package api

import (
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/labstack/echo/v4"
)

// defaultUserPageLimit is the spec's page size of GET /api/users.
const defaultUserPageLimit = 20

// groupName is the spec's group name rule.
var groupName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// userView is a user as the admin endpoints show it. auth_methods lists
// "internal" for a password and "oidc:<provider id>" per auth link.
type userView struct {
	ID          string    `json:"id"`
	Email       string    `json:"email"`
	Name        *string   `json:"name"`
	IsAdmin     bool      `json:"is_admin"`
	Groups      []string  `json:"groups"`
	AuthMethods []string  `json:"auth_methods"`
	CreatedAt   time.Time `json:"created_at"`
}

func userViewOf(u *User) userView {
	methods := []string{}
	if u.PasswordHash != "" {
		methods = append(methods, ProviderInternal)
	}
	for _, p := range u.OIDCProviders {
		methods = append(methods, "oidc:"+p)
	}
	return userView{
		ID: u.ID, Email: u.Email, Name: u.Name, IsAdmin: u.IsAdmin,
		Groups: nonNil(u.Groups), AuthMethods: methods, CreatedAt: u.CreatedAt.UTC(),
	}
}

func (s *server) listUsers(c echo.Context) error {
	limit, offset, err := page(c)
	if err != nil {
		return err
	}
	if c.QueryParam("limit") == "" {
		limit = defaultUserPageLimit
	}
	users, total, err := s.auth.users.Users(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	out := list[userView]{Items: make([]userView, len(users)), Total: total}
	for i, u := range users {
		out.Items[i] = userViewOf(u)
	}
	return c.JSON(http.StatusOK, out)
}

// userIDParam returns the `id` path parameter; ids are UUIDs, so anything
// else is a 404 without a lookup.
func userIDParam(c echo.Context) (string, error) {
	id := c.Param("id")
	if !isUUID(id) {
		return "", notFound("user %q", id)
	}
	return id, nil
}

func (s *server) getUser(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	u, err := s.auth.users.User(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, userViewOf(u))
}

type setAdminRequest struct {
	IsAdmin *bool `json:"is_admin"`
}

func (s *server) setAdmin(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	var req setAdminRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.IsAdmin == nil {
		return badRequest(`"is_admin" (true or false) is required`)
	}
	// Refusing self-revocation keeps at least the caller an admin, so the
	// server cannot lose its last admin by a slip.
	if id == caller(c).user.ID && !*req.IsAdmin {
		return badRequest("you cannot revoke your own admin status; ask another admin")
	}
	u, err := s.auth.users.SetAdmin(c.Request().Context(), id, *req.IsAdmin)
	if err != nil {
		return err
	}
	s.auth.revocations.changed(id) // what their streams show may change
	return c.JSON(http.StatusOK, map[string]bool{"is_admin": u.IsAdmin})
}

type setGroupsRequest struct {
	Groups *[]string `json:"groups"`
}

func (s *server) setGroups(c echo.Context) error {
	id, err := userIDParam(c)
	if err != nil {
		return err
	}
	var req setGroupsRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Groups == nil {
		return badRequest(`"groups" (an array of group names) is required`)
	}
	for _, g := range *req.Groups {
		if !groupName.MatchString(g) {
			return badRequest("invalid group name %q: use 1 to 64 letters, digits, _ or -", g)
		}
	}
	u, err := s.auth.users.SetGroups(c.Request().Context(), id, slices.Clone(*req.Groups))
	if err != nil {
		return err
	}
	s.auth.revocations.changed(id) // what their streams show may change
	return c.JSON(http.StatusOK, map[string][]string{"groups": nonNil(u.Groups)})
}

func (s *server) listGroups(c echo.Context) error {
	groups, err := s.auth.users.Groups(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]string{"groups": nonNil(groups)})
}
