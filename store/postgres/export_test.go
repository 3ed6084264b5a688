package postgres

import "time"

// ForceFence makes db write as the leader at epoch until the deadline,
// whatever the lease says: the tests' way to send a deposed leader's
// write to the database and watch the fence refuse it.
func (db *DB) ForceFence(epoch int64, until time.Time) {
	db.fence.Store(&fenceState{epoch: epoch, until: until})
}
