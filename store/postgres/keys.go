package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/accounts"
)

// CreateAPIKey stores a key; a prefix the user already has is
// accounts.ErrAPIKeyPrefixTaken (prefixes identify a user's keys for
// revocation), decided by the unique index.
func (db *DB) CreateAPIKey(ctx context.Context, k *accounts.APIKey) error {
	if k.Hash == "" || k.UserID == "" || k.Prefix == "" {
		return fmt.Errorf("create api key: needs a hash, a prefix and a user: %w", accounts.ErrInvalidRecord)
	}
	for _, f := range [][2]string{{"api key hash", k.Hash}, {"user id", k.UserID}, {"api key prefix", k.Prefix}} {
		if err := accountName(f[0], f[1]); err != nil {
			return fmt.Errorf("create api key: %w", err)
		}
	}
	rec, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("create api key: encode: %w", err)
	}
	err = db.audited(ctx, func(q querier) error {
		_, err := q.Exec(ctx, `INSERT INTO api_keys (hash, user_id, prefix, record) VALUES ($1, $2, $3, $4)`,
			k.Hash, k.UserID, k.Prefix, rec)
		return err
	})
	switch {
	case violates(err, "api_keys_user_prefix_unique"):
		return fmt.Errorf("create api key: prefix %s: %w", k.Prefix, accounts.ErrAPIKeyPrefixTaken)
	case violates(err, "api_keys_pkey"):
		return fmt.Errorf("create api key: a key with that hash is stored already: %w", accounts.ErrInvalidRecord)
	case err != nil:
		return fmt.Errorf("create api key: %w", err)
	}
	return nil
}

// getAPIKey reads a key, and with forUpdate locks its row until the
// transaction ends.
func getAPIKey(ctx context.Context, q querier, hash string, forUpdate bool) (*accounts.APIKey, error) {
	if !storable(hash) {
		return nil, accounts.ErrAPIKeyNotFound
	}
	sql := `SELECT record FROM api_keys WHERE hash = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	return scanRecord[accounts.APIKey](q.QueryRow(ctx, sql, hash), "api key", "", accounts.ErrAPIKeyNotFound)
}

// APIKeyByHash returns the key with that SHA-256 (accounts.ErrAPIKeyNotFound).
func (db *DB) APIKeyByHash(ctx context.Context, hash string) (*accounts.APIKey, error) {
	return getAPIKey(ctx, db.pool, hash, false)
}

// APIKeys lists a user's keys ordered by prefix (byte order).
func (db *DB) APIKeys(ctx context.Context, userID string) ([]*accounts.APIKey, error) {
	if !storable(userID) {
		return []*accounts.APIKey{}, nil
	}
	rows, err := db.pool.Query(ctx, `SELECT record FROM api_keys WHERE user_id = $1 ORDER BY prefix`, userID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	keys, err := scanRecords[accounts.APIKey](rows, "api keys")
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// DeleteAPIKey revokes the user's key with that prefix; another user's
// key is accounts.ErrAPIKeyNotFound, exactly like a missing one.
func (db *DB) DeleteAPIKey(ctx context.Context, userID, prefix string) error {
	if !storable(userID, prefix) {
		return fmt.Errorf("revoke api key: %s: %w", prefix, accounts.ErrAPIKeyNotFound)
	}
	err := db.audited(ctx, func(q querier) error {
		tag, err := q.Exec(ctx, `DELETE FROM api_keys WHERE user_id = $1 AND prefix = $2`, userID, prefix)
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("%s: %w", prefix, accounts.ErrAPIKeyNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	return nil
}

// TouchAPIKey records a use of the key. It locks the key's row rather
// than running serializable: uses of one key by parallel requests queue
// for a moment instead of failing and retrying.
func (db *DB) TouchAPIKey(ctx context.Context, hash string, at time.Time) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		k, err := getAPIKey(ctx, tx, hash, true)
		if err != nil {
			return err
		}
		k.LastUsedAt = &at
		rec, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode api key: %w", err)
		}
		_, err = tx.Exec(ctx, `UPDATE api_keys SET record = $2 WHERE hash = $1`, hash, rec)
		return err
	})
	if err != nil {
		return fmt.Errorf("record api key use: %w", err)
	}
	return nil
}
