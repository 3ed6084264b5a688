// Package accounts holds the records of authentication (users, OIDC links,
// refresh tokens, API keys), the storage port for them with its sentinel
// errors, and the ACL that decides what a user may do with a task: the api
// package uses it, the store package implements the port, and neither
// imports the other.
// It imports none of the rooms (engine, store, api, runners, app, ui) and no
// net/http.
package accounts

import (
	"context"
	"time"
)

// User is an account. Email is unique, compared case-insensitively.
type User struct {
	ID    string  `json:"id"`
	Email string  `json:"email"`
	Name  *string `json:"name"`
	// PasswordHash is an argon2id PHC string; empty for users who only
	// sign in through OIDC.
	PasswordHash string    `json:"password_hash,omitempty"`
	IsAdmin      bool      `json:"is_admin"`
	Groups       []string  `json:"groups"`
	CreatedAt    time.Time `json:"created_at"`
	// OIDCProviders lists the providers the user has an auth link with, in
	// the order the links were made.
	OIDCProviders []string `json:"oidc_providers,omitempty"`
}

// AuthLink ties an OIDC identity (provider id and the token's subject) to
// a user.
type AuthLink struct {
	Provider  string    `json:"provider"`
	Subject   string    `json:"subject"`
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`
}

// LinkRule is what an OIDC login may do besides signing in to the user its
// identity is already linked to: the provider's word on the email, and the
// server's on linking admins.
type LinkRule struct {
	// EmailVerified: the provider vouches for the address (email_verified
	// is true). Without it only an identity already linked signs in
	// (ErrEmailUnverified).
	EmailVerified bool
	// LinkAdmins lets a login be linked by email to an admin; without it
	// that is ErrAdminNotLinked.
	LinkAdmins bool
}

// RefreshToken is a stored refresh token; the token itself is never
// stored, only Hash (see the api's refreshHash).
type RefreshToken struct {
	Hash   string `json:"hash"`
	UserID string `json:"user_id"`
	// Family names the login the token descends from: a login starts one
	// and every rotation passes it on, so the reuse of one rotated token
	// can revoke the whole chain. Records from before families have none
	// and are each their own family (see FamilyID).
	Family    string    `json:"family,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// RotatedAt is when the token was exchanged for its successor. The
	// record stays until it expires, so a second use is recognised as
	// reuse rather than as an unknown token.
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
}

// FamilyID is the token's family: Family, or for a record written before
// families existed, its own hash.
func (t *RefreshToken) FamilyID() string {
	if t.Family != "" {
		return t.Family
	}
	return t.Hash
}

// APIKey is a stored API key; Hash is the hex SHA-256 of the key.
type APIKey struct {
	Hash       string     `json:"hash"`
	Prefix     string     `json:"prefix"`
	Name       string     `json:"name"`
	UserID     string     `json:"user_id"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// Scopes limit what the key may do (see scopes.go); none (a record of
	// before scopes, or a key created without) is every scope: all its
	// user may do.
	Scopes []Scope `json:"scopes,omitempty"`
}

// UserStore persists users and their credentials; *store.DB implements it.
// Its errors wrap this package's sentinels (errors.go): a missing user is
// ErrUserNotFound, a duplicate email ErrEmailTaken, and so on.
type UserStore interface {
	// CreateUser stores a new user (ErrEmailTaken).
	CreateUser(ctx context.Context, u *User) error
	User(ctx context.Context, id string) (*User, error)
	UserByEmail(ctx context.Context, email string) (*User, error)
	// Users pages users in creation order and returns their total.
	Users(ctx context.Context, limit, offset int) ([]*User, int, error)
	// SetAdmin grants or revokes admin status. Revoking the last admin's
	// is ErrLastAdmin, decided in the transaction that writes it, so two
	// admins demoting each other at once cannot both succeed.
	SetAdmin(ctx context.Context, id string, isAdmin bool) (*User, error)
	SetGroups(ctx context.Context, id string, groups []string) (*User, error)
	// SetPassword replaces the user's password hash and, in the same
	// transaction, revokes every refresh token of the user except those of
	// keepFamily ("" revokes them all), so other logins must sign in again,
	// and with revokeKeys every API key of the user.
	SetPassword(ctx context.Context, id, hash, keepFamily string, revokeKeys bool) (*User, error)
	// DeleteUser removes the user with their auth links, refresh tokens and
	// API keys in one transaction: nothing they held works afterwards.
	// Deleting the last admin is ErrLastAdmin.
	DeleteUser(ctx context.Context, id string) error
	// Groups lists the distinct group names users have, sorted.
	Groups(ctx context.Context) ([]string, error)

	// ProvisionLinkedUser applies the OIDC just-in-time rules in one
	// transaction: the user linked to link's provider and subject; else the
	// user with that email, now linked; else newUser, created and linked.
	// rule limits the last two (ErrEmailUnverified, ErrAdminNotLinked).
	ProvisionLinkedUser(ctx context.Context, link AuthLink, email string, newUser *User, rule LinkRule) (*User, error)

	// PutRefreshToken stores the first token of a family (a login).
	PutRefreshToken(ctx context.Context, t *RefreshToken) error
	// RotateRefreshToken marks the token with oldHash rotated and stores
	// next for the same user and family, atomically, and returns the old
	// token. An unknown or expired (at now) token is ErrRefreshTokenNotFound; a
	// token already rotated is ErrTokenReused, and its whole family is
	// revoked before the call returns.
	RotateRefreshToken(ctx context.Context, oldHash string, next *RefreshToken, now time.Time) (*RefreshToken, error)
	// RevokeRefreshFamily revokes the token with that hash and every token
	// of its family (logout) and returns their user's id; an unknown hash
	// is no error and no user ("").
	RevokeRefreshFamily(ctx context.Context, hash string) (string, error)
	// RefreshFamilyLive reports whether a family still has tokens, that
	// is, whether its login is neither logged out nor revoked for reuse.
	RefreshFamilyLive(ctx context.Context, family string) (bool, error)

	CreateAPIKey(ctx context.Context, k *APIKey) error
	APIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// APIKeys lists a user's keys ordered by prefix.
	APIKeys(ctx context.Context, userID string) ([]*APIKey, error)
	DeleteAPIKey(ctx context.Context, userID, prefix string) error
	TouchAPIKey(ctx context.Context, hash string, at time.Time) error
}
