package postgres

import (
	"context"
	"time"
)

// SetLogWritten makes a job's log look last written at `at`, for the
// retention tests.
func SetLogWritten(ctx context.Context, db *DB, jobID string, at time.Time) error {
	_, err := db.pool.Exec(ctx, `UPDATE job_logs SET written_at = $2 WHERE job_id = $1`, jobID, at)
	return err
}
