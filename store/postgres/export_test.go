package postgres

import (
	"context"
	"time"
)

// ForceFence makes db write as the leader at epoch until the deadline,
// whatever the lease says: the tests' way to send a deposed leader's
// write to the database and watch the fence refuse it.
func (db *DB) ForceFence(epoch int64, until time.Time) {
	db.fence.Store(&fenceState{epoch: epoch, until: until})
}

// SetLogWritten makes a job's log look last written at `at`, for the
// retention tests.
func SetLogWritten(ctx context.Context, db *DB, jobID string, at time.Time) error {
	_, err := db.pool.Exec(ctx, `UPDATE job_logs SET written_at = $2 WHERE job_id = $1`, jobID, at)
	return err
}
