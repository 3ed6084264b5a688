package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
)

// Admin changes of accounts: each keeps its invariants (at least one
// admin; nothing a deleted user held still works) inside the one
// serializable transaction that writes it.

// SetPassword replaces a user's password hash and revokes their refresh
// tokens except those of keepFamily ("" = all), and with revokeKeys their
// API keys, in one transaction.
func (db *DB) SetPassword(ctx context.Context, id, hash, keepFamily string, revokeKeys bool) (*accounts.User, error) {
	u, err := db.updateUser(ctx, id, func(tx pgx.Tx, u *accounts.User) error {
		u.PasswordHash = hash
		if revokeKeys {
			if _, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE user_id = $1`, u.ID); err != nil {
				return fmt.Errorf("revoke api keys: %w", err)
			}
		}
		return revokeUserRefresh(ctx, tx, u.ID, keepFamily)
	})
	if err != nil {
		return nil, fmt.Errorf("set password: %w", err)
	}
	return u, nil
}

// revokeUserRefresh deletes every refresh token of the user but those of
// keepFamily.
func revokeUserRefresh(ctx context.Context, tx pgx.Tx, userID, keepFamily string) error {
	if !storable(keepFamily) {
		keepFamily = "" // no family has that name: keep none
	}
	if _, err := tx.Exec(ctx, `DELETE FROM refresh_tokens WHERE user_id = $1 AND family <> $2`, userID, keepFamily); err != nil {
		return fmt.Errorf("revoke refresh tokens: %w", err)
	}
	return nil
}

// DeleteUser removes a user with their auth links (by the foreign key),
// refresh tokens and API keys in one transaction. Deleting the last admin
// is accounts.ErrLastAdmin.
func (db *DB) DeleteUser(ctx context.Context, id string) error {
	err := db.serializable(ctx, func(tx pgx.Tx) error {
		u, err := getUser(ctx, tx, id)
		if err != nil {
			return err
		}
		if u.IsAdmin {
			if err := keepAnAdmin(ctx, tx, u.ID); err != nil {
				return err
			}
		}
		if err := revokeUserRefresh(ctx, tx, u.ID, ""); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE user_id = $1`, u.ID); err != nil {
			return fmt.Errorf("delete api keys: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, u.ID); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete user %s: %w", id, err)
	}
	return nil
}
