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

// PlanCounts sums how often the prepared statements whose text contains
// part were planned generically and how often custom, on the connection
// the pool hands out (the only one, with MaxConns 1).
func PlanCounts(ctx context.Context, db *DB, part string) (generic, custom int64, err error) {
	err = db.pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`, part).Scan(&generic, &custom)
	return generic, custom, err
}
