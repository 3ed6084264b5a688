package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine"
)

// Worker returns a worker by id (engine.ErrNotFound).
func (db *DB) Worker(ctx context.Context, id string) (*engine.Worker, error) {
	return getRecord[engine.Worker](ctx, db.pool, `SELECT rec FROM workers WHERE id = $1`, "worker", id)
}

// Workers returns a page of workers ordered by registration time then id,
// and their total. Workers are few: the total is counted.
func (db *DB) Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error) {
	if offset < 0 {
		return nil, 0, fmt.Errorf("list workers: negative offset %d: %w", offset, engine.ErrInvalid)
	}
	if limit <= 0 {
		limit = defaultLimit
	}
	batch := &pgx.Batch{}
	var total int
	batch.Queue(`SELECT count(*) FROM workers`).QueryRow(func(r pgx.Row) error { return r.Scan(&total) })
	var workers []*engine.Worker
	batch.Queue(`SELECT rec FROM workers ORDER BY registered_ns, id LIMIT $1 OFFSET $2`, limit, offset).
		Query(func(rows pgx.Rows) (err error) {
			workers, err = records[engine.Worker](rows, "worker")
			return err
		})
	if err := db.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, 0, fmt.Errorf("list workers: %w", err)
	}
	return workers, total, nil
}

// WorkerSteps returns the newest steps a worker claimed, at most limit
// (limit <= 0 means 50), each joined with its job, and their total (a
// maintained count).
func (db *DB) WorkerSteps(ctx context.Context, workerID string, limit int) ([]*engine.WorkerStep, int, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	if !storable(workerID) {
		return nil, 0, nil
	}
	batch := &pgx.Batch{}
	var total int
	batch.Queue(`SELECT coalesce((SELECT n FROM worker_step_counts WHERE worker_id = $1), 0)`, workerID).
		QueryRow(func(r pgx.Row) error { return r.Scan(&total) })
	var out []*engine.WorkerStep
	// A job removed by retention leaves its step listed without the join.
	batch.Queue(`SELECT s.rec, j.workspace, j.task_name, j.access_path, j.status
		FROM steps s LEFT JOIN jobs j ON j.id = s.job_id
		WHERE s.worker_id = $1 ORDER BY s.claim_ns DESC, s.job_id DESC, s.name DESC LIMIT $2`, workerID, limit).
		Query(func(rows pgx.Rows) error {
			var (
				v                          []byte
				ws, task, access, jobState *string
			)
			_, err := pgx.ForEachRow(rows, []any{&v, &ws, &task, &access, &jobState}, func() error {
				var s struct {
					JobID        string     `json:"job_id"`
					Name         string     `json:"step_name"`
					ActionType   string     `json:"action_type"`
					Status       string     `json:"status"`
					StartedAt    *time.Time `json:"started_at"`
					CompletedAt  *time.Time `json:"completed_at"`
					ErrorMessage *string    `json:"error_message"`
				}
				if err := json.Unmarshal(v, &s); err != nil {
					return fmt.Errorf("decode step of worker %s: %w", workerID, err)
				}
				w := &engine.WorkerStep{JobID: s.JobID, StepName: s.Name, ActionType: s.ActionType, Status: s.Status,
					StartedAt: s.StartedAt, CompletedAt: s.CompletedAt, ErrorMessage: s.ErrorMessage}
				if ws != nil {
					w.Workspace, w.TaskName, w.AccessPath, w.JobStatus = *ws, *task, *access, *jobState
				}
				out = append(out, w)
				return nil
			})
			return err
		})
	if err := db.pool.SendBatch(ctx, batch).Close(); err != nil {
		return nil, 0, fmt.Errorf("list steps of worker %s: %w", workerID, err)
	}
	return out, total, nil
}
