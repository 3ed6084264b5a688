package store

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

var _ engine.KeyedJobs = (*DB)(nil)

// jobKey is a job's idempotency key, taken from the batch on the loop.
type jobKey struct{ key, id string }

func jobKeys(jobs []*engine.Job) []jobKey {
	var out []jobKey
	for _, j := range jobs {
		if j != nil && j.IdempotencyKey != "" {
			out = append(out, jobKey{j.IdempotencyKey, j.ID})
		}
	}
	return out
}

// putJobKeys records which job each key made; a key keeps its first job.
// Retention leaves the entries of the jobs it removes: a later request
// with such a key finds no job and makes one (engine.jobForKey).
func putJobKeys(tx *bolt.Tx, keys []jobKey) error {
	b := tx.Bucket(bucketJobKeys)
	for _, k := range keys {
		if b.Get([]byte(k.key)) != nil {
			continue
		}
		if err := b.Put([]byte(k.key), []byte(k.id)); err != nil {
			return fmt.Errorf("put idempotency key of job %s: %w", k.id, err)
		}
	}
	return nil
}

// JobByIdempotencyKey is the id of the job a key made, or "".
func (db *DB) JobByIdempotencyKey(_ context.Context, key string) (string, error) {
	var id string
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketJobKeys).Get([]byte(key)); v != nil {
			id = string(v)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("find the job of an idempotency key: %w", err)
	}
	return id, nil
}
