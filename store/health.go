package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketHealth holds one key that health checks overwrite.
var bucketHealth = []byte("health")

// CheckWrite proves the database accepts a write: a tiny write transaction
// (synced like every other) overwriting the time of the last check.
func (db *DB) CheckWrite(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := timeBytes(time.Now())
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketHealth)
		if err != nil {
			return err
		}
		return b.Put([]byte("last_check"), now[:])
	})
	if err != nil {
		return fmt.Errorf("database refuses writes: %w", err)
	}
	return nil
}
