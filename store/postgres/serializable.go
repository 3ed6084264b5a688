package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxTxAttempts bounds how often a transaction PostgreSQL aborted to keep
// the history serializable is run again. Each retry runs after the
// transaction it lost to has committed, so one contender gets through per
// round; the bound covers a handful of callers racing for one record.
const maxTxAttempts = 16

// serializable runs fn in a SERIALIZABLE transaction and commits it, and
// runs it again, after a short random pause, when PostgreSQL aborts it as
// a serialization failure or a deadlock victim. An invariant fn checks by
// reading (at least one admin, a token rotates once, one user per email)
// then holds against every concurrent transaction, as it did in bbolt's
// single writer. fn must set everything it reports afresh on each run.
//
// The audit entry ctx carries (audit.WithEntry) is appended in the same
// transaction, after fn: the change and its entry commit together.
func (db *DB) serializable(ctx context.Context, fn func(tx pgx.Tx) error) error {
	entries := db.ctxEntries(ctx)
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
			if err := db.fenceTx(ctx, tx); err != nil {
				return err
			}
			if err := fn(tx); err != nil {
				return err
			}
			return db.appendAudit(ctx, tx, entries)
		})
		if !retryable(err) {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
	return fmt.Errorf("gave up after %d attempts at a serializable transaction: %w", maxTxAttempts, err)
}

// retryable: serialization_failure or deadlock_detected, the two aborts
// that say "run it again", not "it is wrong".
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// violates reports whether err is a unique violation of the constraint
// named (its index's name for a primary key).
func violates(err error, constraint string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == constraint
}

// querier is what both the pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}
