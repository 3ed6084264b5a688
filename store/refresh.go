package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
)

// Refresh tokens are stored by hash, and indexed by family (the login they
// descend from) so that a logout or a detected reuse revokes the whole
// chain. A rotated token stays, marked, until it expires: its second use
// is the sign of a stolen copy.

// familyKey indexes a token under its family, ordered by expiry, so the
// expired tokens of a family are a prefix scan away.
func familyKey(t *accounts.RefreshToken) []byte {
	exp := timeBytes(t.ExpiresAt)
	return joinKey(strPrefix(t.FamilyID()), exp[:], []byte(t.Hash))
}

// PutRefreshToken stores a refresh token by its hash.
func (db *DB) PutRefreshToken(ctx context.Context, t *accounts.RefreshToken) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.update(ctx, func(tx *bolt.Tx) error { return putRefresh(tx, t) }); err != nil {
		return fmt.Errorf("store refresh token: %w", err)
	}
	return nil
}

func putRefresh(tx *bolt.Tx, t *accounts.RefreshToken) error {
	if t.Hash == "" || t.UserID == "" {
		return fmt.Errorf("refresh token needs a hash and a user: %w", accounts.ErrInvalidRecord)
	}
	if err := accountName("refresh token family", t.FamilyID()); err != nil {
		return err
	}
	v, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("encode refresh token: %w", err)
	}
	if err := tx.Bucket(bucketRefresh).Put([]byte(t.Hash), v); err != nil {
		return fmt.Errorf("put refresh token: %w", err)
	}
	if err := tx.Bucket(bucketRefreshFam).Put(familyKey(t), nil); err != nil {
		return fmt.Errorf("index refresh token: %w", err)
	}
	if err := tx.Bucket(bucketUserRefresh).Put(userFamilyKey(t.UserID, t.FamilyID()), nil); err != nil {
		return fmt.Errorf("index refresh token by user: %w", err)
	}
	return nil
}

func getRefresh(tx *bolt.Tx, hash string) (*accounts.RefreshToken, error) {
	v := tx.Bucket(bucketRefresh).Get([]byte(hash))
	if v == nil {
		return nil, accounts.ErrRefreshTokenNotFound
	}
	var t accounts.RefreshToken
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, fmt.Errorf("decode refresh token: %w", err)
	}
	return &t, nil
}

// deleteRefresh removes one token and its index entry (a record from
// before families has none; deleting a missing key is no error).
func deleteRefresh(tx *bolt.Tx, t *accounts.RefreshToken) error {
	if err := tx.Bucket(bucketRefresh).Delete([]byte(t.Hash)); err != nil {
		return fmt.Errorf("delete refresh token: %w", err)
	}
	return tx.Bucket(bucketRefreshFam).Delete(familyKey(t))
}

// deleteFamily removes the family's indexed tokens: all of them, or with
// expiredAt set only those expired then (a prefix, by the key order). A
// family left empty leaves its user's index too.
func deleteFamily(tx *bolt.Tx, userID, family string, expiredAt *time.Time) error {
	prefix := strPrefix(family)
	var until []byte // the expiry past which tokens stay; nil: none stay
	if expiredAt != nil {
		t := timeBytes(*expiredAt)
		until = t[:]
	}
	var keys [][]byte
	c := tx.Bucket(bucketRefreshFam).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if until != nil && bytes.Compare(k[len(prefix):len(prefix)+8], until) > 0 {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := tx.Bucket(bucketRefresh).Delete(k[len(prefix)+8:]); err != nil {
			return fmt.Errorf("delete refresh token: %w", err)
		}
		if err := tx.Bucket(bucketRefreshFam).Delete(k); err != nil {
			return fmt.Errorf("delete refresh token index: %w", err)
		}
	}
	if k, _ := tx.Bucket(bucketRefreshFam).Cursor().Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) {
		return nil
	}
	return tx.Bucket(bucketUserRefresh).Delete(userFamilyKey(userID, family))
}

// revokeFamily removes t and every token of its family.
func revokeFamily(tx *bolt.Tx, t *accounts.RefreshToken) error {
	if err := deleteRefresh(tx, t); err != nil {
		return err
	}
	return deleteFamily(tx, t.UserID, t.FamilyID(), nil)
}

// RotateRefreshToken marks the token with oldHash rotated and stores next
// in its family, in one transaction, so a token rotates once even when two
// requests race with it. Unknown and expired tokens are
// accounts.ErrRefreshTokenNotFound
// (an expired one is deleted on the way); a rotated one is
// accounts.ErrTokenReused, after its family has been revoked.
func (db *DB) RotateRefreshToken(ctx context.Context, oldHash string, next *accounts.RefreshToken, now time.Time) (*accounts.RefreshToken, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		old             *accounts.RefreshToken
		expired, reused bool
	)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if old, err = getRefresh(tx, oldHash); err != nil {
			return err
		}
		if !now.Before(old.ExpiresAt) {
			// Committing the delete is the point; the caller gets not-found.
			expired = true
			if err := deleteRefresh(tx, old); err != nil {
				return err
			}
			return deleteFamily(tx, old.UserID, old.FamilyID(), &now)
		}
		if old.RotatedAt != nil {
			reused = true
			return revokeFamily(tx, old)
		}
		if old.Family == "" {
			// A record from before families founds one named by its hash,
			// indexed from now on like any other.
			old.Family = old.Hash
		}
		rotatedAt := now
		old.RotatedAt = &rotatedAt
		if err := putRefresh(tx, old); err != nil {
			return err
		}
		next.UserID, next.Family = old.UserID, old.Family
		if err := putRefresh(tx, next); err != nil {
			return err
		}
		// Rotated tokens are kept until they expire; a long-lived login
		// sheds its expired ones here rather than piling them up.
		return deleteFamily(tx, old.UserID, old.Family, &now)
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
// so logging out twice is harmless.
func (db *DB) RevokeRefreshFamily(ctx context.Context, hash string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	userID := ""
	// A sign-out's entry names the token's user, known only here; an
	// unknown token changes nothing and gets none.
	entry, audited := audit.FromContext(ctx)
	err := db.update(audit.WithoutEntry(ctx), func(tx *bolt.Tx) error {
		t, err := getRefresh(tx, hash)
		if err != nil {
			if errors.Is(err, accounts.ErrRefreshTokenNotFound) {
				return nil
			}
			return err
		}
		userID = t.UserID
		if err := revokeFamily(tx, t); err != nil {
			return err
		}
		if audited {
			return db.appendAudit(tx, []audit.Entry{audit.ForUser(entry, userID)})
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
	live := false
	prefix := strPrefix(family)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		k, _ := tx.Bucket(bucketRefreshFam).Cursor().Seek(prefix)
		live = k != nil && bytes.HasPrefix(k, prefix)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("look up refresh token family: %w", err)
	}
	return live, nil
}
