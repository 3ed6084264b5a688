package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/accounts"
)

func userKeyKey(userID, prefix string) []byte {
	return joinKey(strPrefix(userID), []byte(prefix))
}

// CreateAPIKey stores a key; a prefix the user already has is
// accounts.ErrAPIKeyPrefixTaken (prefixes identify a user's keys for revocation).
func (db *DB) CreateAPIKey(ctx context.Context, k *accounts.APIKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if k.Hash == "" || k.UserID == "" || k.Prefix == "" {
		return fmt.Errorf("create api key: needs a hash, a prefix and a user: %w", accounts.ErrInvalidRecord)
	}
	if err := accountName("user id", k.UserID); err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketUserKeys)
		ik := userKeyKey(k.UserID, k.Prefix)
		if idx.Get(ik) != nil {
			return fmt.Errorf("prefix %s: %w", k.Prefix, accounts.ErrAPIKeyPrefixTaken)
		}
		if err := putAPIKey(tx, k); err != nil {
			return err
		}
		return idx.Put(ik, []byte(k.Hash))
	})
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

func putAPIKey(tx *bolt.Tx, k *accounts.APIKey) error {
	v, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("encode api key: %w", err)
	}
	return tx.Bucket(bucketAPIKeys).Put([]byte(k.Hash), v)
}

func getAPIKey(tx *bolt.Tx, hash []byte) (*accounts.APIKey, error) {
	v := tx.Bucket(bucketAPIKeys).Get(hash)
	if v == nil {
		return nil, accounts.ErrAPIKeyNotFound
	}
	var k accounts.APIKey
	if err := json.Unmarshal(v, &k); err != nil {
		return nil, fmt.Errorf("decode api key: %w", err)
	}
	return &k, nil
}

// APIKeyByHash returns the key with that SHA-256 (accounts.ErrAPIKeyNotFound).
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (*accounts.APIKey, error) {
	var k *accounts.APIKey
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		k, err = getAPIKey(tx, []byte(hash))
		return err
	})
	return k, err
}

// APIKeys lists a user's keys ordered by prefix.
func (db *DB) APIKeys(ctx context.Context, userID string) ([]*accounts.APIKey, error) {
	keys := []*accounts.APIKey{}
	prefix := strPrefix(userID)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketUserKeys).Cursor()
		for ik, hash := c.Seek(prefix); ik != nil && bytes.HasPrefix(ik, prefix); ik, hash = c.Next() {
			k, err := getAPIKey(tx, hash)
			if err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// DeleteAPIKey revokes the user's key with that prefix; another user's
// key is accounts.ErrAPIKeyNotFound, exactly like a missing one.
func (db *DB) DeleteAPIKey(ctx context.Context, userID, prefix string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.update(ctx, func(tx *bolt.Tx) error {
		idx := tx.Bucket(bucketUserKeys)
		ik := userKeyKey(userID, prefix)
		hash := idx.Get(ik)
		if hash == nil {
			return fmt.Errorf("%s: %w", prefix, accounts.ErrAPIKeyNotFound)
		}
		if err := tx.Bucket(bucketAPIKeys).Delete(hash); err != nil {
			return err
		}
		return idx.Delete(ik)
	})
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	return nil
}

// TouchAPIKey records a use of the key.
func (db *DB) TouchAPIKey(ctx context.Context, hash string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		k, err := getAPIKey(tx, []byte(hash))
		if err != nil {
			return err
		}
		k.LastUsedAt = &at
		return putAPIKey(tx, k)
	})
	if err != nil {
		return fmt.Errorf("record api key use: %w", err)
	}
	return nil
}
