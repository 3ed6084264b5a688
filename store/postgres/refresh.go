package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
)

// Refresh tokens are stored by hash, with their family (the login they
// descend from) and expiry in columns, so a logout or a detected reuse
// revokes the whole chain in one statement. A rotated token stays, marked,
// until it expires: its second use is the sign of a stolen copy.

// PutRefreshToken stores a refresh token by its hash (a hash stored
// already is replaced, as bbolt's put does).
func (db *DB) PutRefreshToken(ctx context.Context, t *accounts.RefreshToken) error {
	if err := db.audited(ctx, func(q querier) error { return putRefresh(ctx, q, t) }); err != nil {
		return fmt.Errorf("store refresh token: %w", err)
	}
	return nil
}

func putRefresh(ctx context.Context, q querier, t *accounts.RefreshToken) error {
	if t.Hash == "" || t.UserID == "" {
		return fmt.Errorf("refresh token needs a hash and a user: %w", accounts.ErrInvalidRecord)
	}
	for _, f := range [][2]string{{"refresh token hash", t.Hash}, {"user id", t.UserID}, {"refresh token family", t.FamilyID()}} {
		if err := accountName(f[0], f[1]); err != nil {
			return err
		}
	}
	rec, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode refresh token: %w", err)
	}
	_, err = q.Exec(ctx, `INSERT INTO refresh_tokens (hash, user_id, family, expires_ns, record) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (hash) DO UPDATE SET user_id = excluded.user_id, family = excluded.family,
			expires_ns = excluded.expires_ns, record = excluded.record`,
		t.Hash, t.UserID, t.FamilyID(), t.ExpiresAt.UnixNano(), rec)
	if err != nil {
		return fmt.Errorf("put refresh token: %w", err)
	}
	return nil
}

func getRefresh(ctx context.Context, q querier, hash string) (*accounts.RefreshToken, error) {
	if !storable(hash) {
		return nil, accounts.ErrRefreshTokenNotFound
	}
	var raw []byte
	err := q.QueryRow(ctx, `SELECT record FROM refresh_tokens WHERE hash = $1`, hash).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, accounts.ErrRefreshTokenNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read refresh token: %w", err)
	}
	return decodeRecord[accounts.RefreshToken](raw, "refresh token", "")
}

// shedExpired deletes the family's tokens expired at now: rotated tokens
// are kept until they expire, and a long-lived login sheds them here
// rather than piling them up.
func shedExpired(ctx context.Context, tx pgx.Tx, family string, now time.Time) error {
	if _, err := tx.Exec(ctx, `DELETE FROM refresh_tokens WHERE family = $1 AND expires_ns <= $2`, family, now.UnixNano()); err != nil {
		return fmt.Errorf("delete expired refresh tokens: %w", err)
	}
	return nil
}

// revokeFamily deletes every token of the family.
func revokeFamily(ctx context.Context, tx pgx.Tx, family string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM refresh_tokens WHERE family = $1`, family); err != nil {
		return fmt.Errorf("revoke refresh tokens: %w", err)
	}
	return nil
}

// RotateRefreshToken marks the token with oldHash rotated and stores next
// in its family, in one serializable transaction, so a token rotates once
// even when two requests race with it: PostgreSQL aborts the second, whose
// retry finds the token rotated. Unknown and expired tokens are
// accounts.ErrRefreshTokenNotFound (an expired one is deleted on the way);
// a rotated one is accounts.ErrTokenReused, after its family has been
// revoked.
func (db *DB) RotateRefreshToken(ctx context.Context, oldHash string, next *accounts.RefreshToken, now time.Time) (*accounts.RefreshToken, error) {
	var (
		old             *accounts.RefreshToken
		expired, reused bool
	)
	err := db.serializable(ctx, func(tx pgx.Tx) error {
		expired, reused = false, false
		var err error
		if old, err = getRefresh(ctx, tx, oldHash); err != nil {
			return err
		}
		if !now.Before(old.ExpiresAt) {
			// Committing the delete is the point; the caller gets not-found.
			expired = true
			if _, err := tx.Exec(ctx, `DELETE FROM refresh_tokens WHERE hash = $1`, old.Hash); err != nil {
				return fmt.Errorf("delete refresh token: %w", err)
			}
			return shedExpired(ctx, tx, old.FamilyID(), now)
		}
		if old.RotatedAt != nil {
			reused = true
			return revokeFamily(ctx, tx, old.FamilyID())
		}
		if old.Family == "" {
			// A token stored without a family founds one named by its hash
			// (its family column already says so).
			old.Family = old.Hash
		}
		rotatedAt := now
		old.RotatedAt = &rotatedAt
		if err := putRefresh(ctx, tx, old); err != nil {
			return err
		}
		next.UserID, next.Family = old.UserID, old.Family
		if err := putRefresh(ctx, tx, next); err != nil {
			return err
		}
		return shedExpired(ctx, tx, old.Family, now)
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("rotate refresh token: %w", err)
	case expired:
		return nil, fmt.Errorf("rotate refresh token: expired: %w", accounts.ErrRefreshTokenNotFound)
	case reused:
		return old, fmt.Errorf("rotate refresh token: family %s revoked: %w", old.FamilyID(), accounts.ErrTokenReused)
	}
	return old, nil
}

// RevokeRefreshFamily revokes a refresh token and every token of its
// family and returns their user; an unknown one is no error (and no user),
// so logging out twice is harmless. Serializable, so a rotation racing
// the logout cannot leave its new token behind.
func (db *DB) RevokeRefreshFamily(ctx context.Context, hash string) (string, error) {
	userID := ""
	// A sign-out's entry names the token's user, known only here; an
	// unknown token changes nothing and gets none.
	entry, audited := audit.FromContext(ctx)
	err := db.serializable(audit.WithoutEntry(ctx), func(tx pgx.Tx) error {
		userID = ""
		t, err := getRefresh(ctx, tx, hash)
		if errors.Is(err, accounts.ErrRefreshTokenNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		userID = t.UserID
		if err := revokeFamily(ctx, tx, t.FamilyID()); err != nil {
			return err
		}
		if audited {
			return db.appendAudit(ctx, tx, []audit.Entry{audit.ForUser(entry, userID)})
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("revoke refresh tokens: %w", err)
	}
	return userID, nil
}

// RefreshFamilyLive reports whether the family has any token left.
func (db *DB) RefreshFamilyLive(ctx context.Context, family string) (bool, error) {
	if !storable(family) {
		return false, nil
	}
	var live bool
	if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refresh_tokens WHERE family = $1)`, family).Scan(&live); err != nil {
		return false, fmt.Errorf("look up refresh token family: %w", err)
	}
	return live, nil
}
