package accounts

import "errors"

// The accounts domain's sentinel errors. A UserStore wraps them with %w
// (test with errors.Is); the api package maps each to one HTTP status.
var (
	// ErrUserNotFound: no user has that id or email.
	ErrUserNotFound = errors.New("user not found")
	// ErrEmailTaken: another user already has the email (compared
	// case-insensitively).
	ErrEmailTaken = errors.New("email is already in use")
	// ErrLastAdmin: the change would leave the server without an admin.
	ErrLastAdmin = errors.New("the server must keep at least one admin")
	// ErrAPIKeyNotFound: no such key (another user's key counts as none).
	ErrAPIKeyNotFound = errors.New("api key not found")
	// ErrAPIKeyPrefixTaken: the user already has a key with that prefix.
	ErrAPIKeyPrefixTaken = errors.New("api key prefix is already in use")
	// ErrRefreshTokenNotFound: the refresh token is unknown or expired.
	ErrRefreshTokenNotFound = errors.New("refresh token not found or expired")
	// ErrTokenReused is RotateRefreshToken's answer to a token that was
	// already rotated: someone else holds a copy, so its family is revoked.
	ErrTokenReused = errors.New("refresh token was already used")
	// ErrEmailUnverified: an OIDC login whose identity is not linked yet
	// comes with an address its provider does not vouch for, so it may
	// neither link the user who has it nor create one (that user would be
	// linked by email to whoever later proves the address elsewhere).
	ErrEmailUnverified = errors.New("the identity provider has not verified the email address")
	// ErrAdminNotLinked: an OIDC login's email names an admin, whom a login
	// is linked to by email only where the provider allows it.
	ErrAdminNotLinked = errors.New("an admin's account is not linked to a single sign-on identity by email")
	// ErrInvalidRecord: a record the store cannot keep (a missing id, a
	// name with a NUL byte).
	ErrInvalidRecord = errors.New("invalid account record")
)
