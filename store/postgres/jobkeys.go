package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

var _ engine.KeyedJobs = (*DB)(nil)

// queueJobKeys records which job each idempotency key made, after the
// jobs' own statement in the same commit; a key keeps its first job.
func queueJobKeys(batch *writes, jobs []*engine.Job) error {
	var keys, ids []string
	for _, j := range jobs {
		if j == nil || j.IdempotencyKey == "" {
			continue
		}
		if err := noNUL("idempotency key", j.IdempotencyKey); err != nil {
			return err
		}
		keys, ids = append(keys, j.IdempotencyKey), append(ids, j.ID)
	}
	if len(keys) > 0 {
		batch.Queue(`INSERT INTO job_keys (key, job_id) SELECT * FROM unnest($1::text[], $2::text[])
			ON CONFLICT (key) DO NOTHING`, keys, ids)
	}
	return nil
}

// JobByIdempotencyKey is the id of the job a key made, or "".
func (db *DB) JobByIdempotencyKey(ctx context.Context, key string) (string, error) {
	if !storable(key) {
		return "", nil
	}
	var id string
	err := db.pool.QueryRow(ctx, `SELECT job_id FROM job_keys WHERE key = $1`, key).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("find the job of an idempotency key: %w", unavailable(err))
	}
	return id, nil
}
