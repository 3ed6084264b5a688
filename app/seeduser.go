package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/app/config"
)

// seedInitialUser creates auth.initial_user as an admin unless a user with
// that email exists. It reports whether it created one.
func seedInitialUser(ctx context.Context, users auth.UserStore, a *config.Auth, now time.Time) (bool, error) {
	if a == nil || a.InitialUser == nil {
		return false, nil
	}
	email := strings.TrimSpace(a.InitialUser.Email)
	_, err := users.UserByEmail(ctx, email)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, accounts.ErrUserNotFound) {
		return false, fmt.Errorf("seed initial user: %w", err)
	}
	hash, err := auth.HashPassword(a.InitialUser.Password)
	if err != nil {
		return false, fmt.Errorf("seed initial user: %w", err)
	}
	err = users.CreateUser(ctx, &auth.User{
		ID: uuid.NewString(), Email: email, PasswordHash: hash,
		IsAdmin: true, Groups: []string{}, CreatedAt: now.UTC(),
	})
	if err != nil {
		return false, fmt.Errorf("seed initial user: %w", err)
	}
	return true, nil
}
