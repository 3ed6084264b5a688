package wire

import "time"

// The sign-in, API key and user management endpoints (api/auth).

// LoginRequest is the body of POST /api/auth/login.
type LoginRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// TokenPair is the answer of login and refresh (POST /api/auth/login,
// /api/auth/refresh): a short-lived access token and the refresh token
// that renews it, once.
type TokenPair struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// RefreshRequest is the body of POST /api/auth/refresh and
// /api/auth/logout.
type RefreshRequest struct {
	RefreshToken string `json:"refresh_token"`
}

// Me is GET /api/auth/me: the caller.
type Me struct {
	UserID    string    `json:"user_id"`
	Name      *string   `json:"name"`
	Email     string    `json:"email"`
	IsAdmin   bool      `json:"is_admin"`
	Groups    []string  `json:"groups"`
	CreatedAt time.Time `json:"created_at"`
}

// CreateAPIKeyRequest is the body of POST /api/auth/api-keys; a nil
// ExpiresInDays is a key that never expires.
type CreateAPIKeyRequest struct {
	Name          string `json:"name"`
	ExpiresInDays *int   `json:"expires_in_days"`
	// Scopes limit the key (read, run, approve, admin); none = every
	// scope, all its user may do.
	Scopes []string `json:"scopes,omitempty"`
}

// APIKeyCreated is the answer of POST /api/auth/api-keys, the only answer
// that ever holds the raw key.
type APIKeyCreated struct {
	Key       string     `json:"key"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	ExpiresAt *time.Time `json:"expires_at"`
	Scopes    []string   `json:"scopes"`
}

// APIKey is an item of GET /api/auth/api-keys: a key without its secret,
// named by its prefix.
type APIKey struct {
	Prefix     string     `json:"prefix"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Scopes     []string   `json:"scopes"`
}

// User is a user as the admin endpoints (/api/users) show it. AuthMethods
// lists "internal" for a password and "oidc:<provider id>" per auth link.
type User struct {
	ID          string    `json:"id"`
	Email       string    `json:"email"`
	Name        *string   `json:"name"`
	IsAdmin     bool      `json:"is_admin"`
	Groups      []string  `json:"groups"`
	AuthMethods []string  `json:"auth_methods"`
	CreatedAt   time.Time `json:"created_at"`
}

// CreateUserRequest is the body of POST /api/users; a nil Groups is none.
type CreateUserRequest struct {
	Email    string    `json:"email"`
	Name     *string   `json:"name"`
	Password string    `json:"password"`
	IsAdmin  bool      `json:"is_admin"`
	Groups   *[]string `json:"groups"`
}

// PasswordRequest is the body of PUT /api/users/{id}/password, an admin
// setting a user's password (CurrentPassword is not read there).
type PasswordRequest struct {
	CurrentPassword *string `json:"current_password"`
	Password        string  `json:"password"`
}

// OwnPasswordRequest is the body of PUT /api/auth/me/password, a user
// changing their own password (CurrentPassword required).
type OwnPasswordRequest struct {
	PasswordRequest
	// RevokeAPIKeys (default true) revokes the user's API keys with the
	// password: a password thought leaked may have minted keys.
	RevokeAPIKeys *bool `json:"revoke_api_keys"`
}

// SetAdminRequest is the body of PUT /api/users/{id}/admin; IsAdmin is
// required.
type SetAdminRequest struct {
	IsAdmin *bool `json:"is_admin"`
}

// AdminAnswer is the answer of PUT /api/users/{id}/admin.
type AdminAnswer struct {
	IsAdmin bool `json:"is_admin"`
}

// SetGroupsRequest is the body of PUT /api/users/{id}/groups; Groups is
// required (an empty array clears them).
type SetGroupsRequest struct {
	Groups *[]string `json:"groups"`
}

// GroupsAnswer is the answer of PUT /api/users/{id}/groups (the user's
// groups) and of GET /api/groups (every group in use).
type GroupsAnswer struct {
	Groups []string `json:"groups"`
}
