package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

// defaultLimit is the page size when a caller passes limit <= 0, as bbolt's.
const defaultLimit = 50

// Job returns a job by id (engine.ErrNotFound).
func (db *DB) Job(ctx context.Context, id string) (*engine.Job, error) {
	return getRecord[engine.Job](ctx, db.pool, `SELECT rec FROM jobs WHERE id = $1`, "job", id)
}

// getRecord reads the one record query selects (its rec) for id; what
// names it in the errors.
func getRecord[T any](ctx context.Context, q querier, query, what, id string) (*T, error) {
	if !storable(id) {
		return nil, fmt.Errorf("%s %s: %w", what, id, engine.ErrNotFound)
	}
	return scanRecord[T](q.QueryRow(ctx, query, id), what, id, engine.ErrNotFound)
}

// records decodes the rec column of every row.
func records[T any](rows pgx.Rows, what string) ([]*T, error) {
	var out []*T
	var v []byte
	_, err := pgx.ForEachRow(rows, []any{&v}, func() error {
		var r T
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode %s: %w", what, err)
		}
		out = append(out, &r)
		return nil
	})
	return out, err
}

// queryRecords runs query and decodes the rec of each row.
func queryRecords[T any](ctx context.Context, q querier, what, query string, args ...any) ([]*T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, unavailable(err)
	}
	recs, err := records[T](rows, what)
	return recs, unavailable(err)
}

// Steps returns a job's steps ordered by Seq (none for an unknown job).
func (db *DB) Steps(ctx context.Context, jobID string) ([]*engine.Step, error) {
	if !storable(jobID) {
		return nil, nil
	}
	steps, err := queryRecords[engine.Step](ctx, db.pool, "step",
		`SELECT rec FROM steps WHERE job_id = $1 ORDER BY seq, name`, jobID)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return steps, nil
}

// LoadActive returns every non-terminal job, and every terminal one whose
// hooks are pending, with all its steps, and all workers: three reads of
// one snapshot (a repeatable-read transaction), through the partial index
// of the active jobs, never the whole jobs table.
func (db *DB) LoadActive(ctx context.Context) (jobs []*engine.Job, steps []*engine.Step, workers []*engine.Worker, err error) {
	err = pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if jobs, err = queryRecords[engine.Job](ctx, tx, "job", `SELECT rec FROM jobs WHERE active ORDER BY id`); err != nil {
			return err
		}
		if steps, err = queryRecords[engine.Step](ctx, tx, "step", `SELECT s.rec FROM jobs j JOIN steps s ON s.job_id = j.id
			WHERE j.active ORDER BY s.job_id, s.seq, s.name`); err != nil {
			return err
		}
		workers, err = queryRecords[engine.Worker](ctx, tx, "worker", `SELECT rec FROM workers ORDER BY id`)
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load active state: %w", err)
	}
	return jobs, steps, workers, nil
}
