package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
)

// Admin changes of accounts: each keeps its invariants (at least one
// admin; nothing a deleted user held still works) inside the one bbolt
// transaction that writes it.

// accountName rejects names that would break the separator-joined keys of
// the auth indexes.
func accountName(what, s string) error {
	if strings.IndexByte(s, sep) >= 0 {
		return fmt.Errorf("%s %q contains a NUL byte: %w", what, s, accounts.ErrInvalidRecord)
	}
	return nil
}

func userFamilyKey(userID, family string) []byte {
	return joinKey(strPrefix(userID), []byte(family))
}

// keepAnAdmin fails with accounts.ErrLastAdmin unless some admin other
// than userID exists. Admin changes are rare and users few, so it reads
// the users rather than keeping a counter that older databases lack; it
// stops at the first other admin.
func keepAnAdmin(tx *bolt.Tx, userID string) error {
	c := tx.Bucket(bucketUsers).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if string(k) == userID {
			continue
		}
		var u struct {
			IsAdmin bool `json:"is_admin"`
		}
		if err := json.Unmarshal(v, &u); err != nil {
			return fmt.Errorf("decode user %s: %w", k, err)
		}
		if u.IsAdmin {
			return nil
		}
	}
	return accounts.ErrLastAdmin
}

// SetPassword replaces a user's password hash and revokes their refresh
// tokens except those of keepFamily ("" = all), and with revokeKeys their
// API keys, in one transaction.
func (db *DB) SetPassword(ctx context.Context, id, hash, keepFamily string, revokeKeys bool) (*accounts.User, error) {
	u, err := db.updateUser(ctx, id, func(tx *bolt.Tx, u *accounts.User) error {
		u.PasswordHash = hash
		if revokeKeys {
			if err := deleteUserKeys(tx, u.ID); err != nil {
				return err
			}
		}
		return revokeUserRefresh(tx, u.ID, keepFamily)
	})
	if err != nil {
		return nil, fmt.Errorf("set password: %w", err)
	}
	return u, nil
}

// revokeUserRefresh deletes every refresh token family of the user but
// keepFamily.
func revokeUserRefresh(tx *bolt.Tx, userID, keepFamily string) error {
	prefix := strPrefix(userID)
	var families []string
	c := tx.Bucket(bucketUserRefresh).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if f := string(k[len(prefix):]); f != keepFamily {
			families = append(families, f)
		}
	}
	for _, f := range families {
		if err := deleteFamily(tx, userID, f, nil); err != nil {
			return err
		}
	}
	return nil
}

// DeleteUser removes a user, their indexes and counts, auth links,
// refresh tokens and API keys in one transaction. Deleting the last admin
// is accounts.ErrLastAdmin.
func (db *DB) DeleteUser(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		u, err := getUser(tx, id)
		if err != nil {
			return err
		}
		if u.IsAdmin {
			if err := keepAnAdmin(tx, u.ID); err != nil {
				return err
			}
		}
		if err := revokeUserRefresh(tx, u.ID, ""); err != nil {
			return err
		}
		if err := deleteUserKeys(tx, u.ID); err != nil {
			return err
		}
		if err := deleteUserLinks(tx, u); err != nil {
			return err
		}
		for _, g := range u.Groups {
			if err := addCount(tx, countGroup(g), -1); err != nil {
				return err
			}
		}
		if err := addCount(tx, []byte(countUsers), -1); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserByEmail).Delete(emailKey(u.Email)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserOrder).Delete(userOrderKey(u)); err != nil {
			return err
		}
		return tx.Bucket(bucketUsers).Delete([]byte(u.ID))
	})
	if err != nil {
		return fmt.Errorf("delete user %s: %w", id, err)
	}
	return nil
}

func deleteUserKeys(tx *bolt.Tx, userID string) error {
	prefix := strPrefix(userID)
	idx := tx.Bucket(bucketUserKeys)
	var keys, hashes [][]byte
	c := idx.Cursor()
	for k, h := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, h = c.Next() {
		keys, hashes = append(keys, bytes.Clone(k)), append(hashes, bytes.Clone(h))
	}
	for i := range keys {
		if err := tx.Bucket(bucketAPIKeys).Delete(hashes[i]); err != nil {
			return fmt.Errorf("delete api key: %w", err)
		}
		if err := idx.Delete(keys[i]); err != nil {
			return fmt.Errorf("delete api key index: %w", err)
		}
	}
	return nil
}

// deleteUserLinks removes the user's OIDC links. Links are keyed by
// provider and subject; the user's record names the providers, so only
// those are read.
func deleteUserLinks(tx *bolt.Tx, u *accounts.User) error {
	links := tx.Bucket(bucketAuthLinks)
	var dead [][]byte
	for _, p := range u.OIDCProviders {
		prefix := strPrefix(p)
		c := links.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var l accounts.AuthLink
			if err := json.Unmarshal(v, &l); err != nil {
				return fmt.Errorf("decode auth link: %w", err)
			}
			if l.UserID == u.ID {
				dead = append(dead, bytes.Clone(k))
			}
		}
	}
	for _, k := range dead {
		if err := links.Delete(k); err != nil {
			return fmt.Errorf("delete auth link: %w", err)
		}
	}
	return nil
}

// backfillUserRefresh indexes the stored refresh tokens by user (and a
// record from before families under its own family), so revoking a
// user's tokens finds them all.
func backfillUserRefresh(tx *bolt.Tx) error {
	var tokens []accounts.RefreshToken
	err := tx.Bucket(bucketRefresh).ForEach(func(_, v []byte) error {
		var t accounts.RefreshToken
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("decode refresh token: %w", err)
		}
		tokens = append(tokens, t)
		return nil
	})
	if err != nil {
		return err
	}
	for i := range tokens {
		t := &tokens[i]
		if err := tx.Bucket(bucketRefreshFam).Put(familyKey(t), nil); err != nil {
			return err
		}
		if err := tx.Bucket(bucketUserRefresh).Put(userFamilyKey(t.UserID, t.FamilyID()), nil); err != nil {
			return err
		}
	}
	return nil
}
