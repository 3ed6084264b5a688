package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/appliance-sh/appliance/engine"
)

// fenceState is what a replica of a pair may write. A DB without one
// (a single server) writes freely; with one, only while it leads.
type fenceState struct {
	// epoch is the lease's epoch this replica leads at; 0: it does not
	// lead, and every write is refused here, before reaching the database.
	epoch int64
	// until is when this replica stops leading by its own monotonic clock
	// (the lease minus a margin, counted from when the last successful
	// renewal was sent): a write after it is refused here too, whether or
	// not the elector has noticed yet (a process resumed after SIGSTOP
	// runs its goroutines in any order).
	until time.Time
}

// fenceCode is the SQLSTATE appliance_fence raises (0004_lease.sql).
const fenceCode = "AP001"

// fenceSQL locks the lease row FOR SHARE and checks the epoch: first in
// every write transaction of a leader.
const fenceSQL = `SELECT appliance_fence($1)`

// fenceEpoch says whether writes must carry a fence, and at which epoch;
// an error when this replica may not write at all.
func (db *DB) fenceEpoch() (epoch int64, fenced bool, err error) {
	f := db.fence.Load()
	if f == nil {
		return 0, false, nil
	}
	if f.epoch == 0 {
		return 0, true, fmt.Errorf("write refused: %w", engine.ErrNotLeader)
	}
	if !time.Now().Before(f.until) {
		return 0, true, fmt.Errorf("write refused: the lease at epoch %d may have run out (no renewal in time): %w",
			f.epoch, engine.ErrNotLeader)
	}
	return f.epoch, true, nil
}

// fenceTx runs the fence first in an explicit transaction.
func (db *DB) fenceTx(ctx context.Context, tx pgx.Tx) error {
	epoch, fenced, err := db.fenceEpoch()
	if err != nil || !fenced {
		return err
	}
	_, err = tx.Exec(ctx, fenceSQL, epoch)
	return fenceError(err)
}

// execFenced runs one writing statement, after the fence when there is
// one: both in one pipelined round trip, one implicit transaction.
func (db *DB) execFenced(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	epoch, fenced, err := db.fenceEpoch()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if !fenced {
		return db.pool.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(fenceSQL, epoch)
	var tag pgconn.CommandTag
	b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error { tag = ct; return nil })
	return tag, fenceError(db.pool.SendBatch(ctx, b).Close())
}

// fenceError turns the fence's refusal into engine.ErrNotLeader.
func fenceError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fenceCode {
		return fmt.Errorf("write refused by the lease (%s): %w", pe.Message, engine.ErrNotLeader)
	}
	return err
}

// writer is the pool for a lone write: each Exec runs after the fence.
func (db *DB) writer() querier { return fencedPool{db} }

type fencedPool struct{ db *DB }

func (f fencedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return f.db.execFenced(ctx, sql, args...)
}

func (f fencedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return f.db.pool.QueryRow(ctx, sql, args...)
}

func (f fencedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return f.db.pool.Query(ctx, sql, args...)
}
