package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Worker returns a worker by id (engine.ErrNotFound).
func (db *DB) Worker(ctx context.Context, id string) (*engine.Worker, error) {
	return viewRecord(ctx, db, getWorker, id)
}

func getWorker(tx *bolt.Tx, id string) (*engine.Worker, error) {
	return getRecord[engine.Worker](tx, bucketWorkers, "worker", id, engine.ErrNotFound)
}

// Workers returns a page of workers ordered by registration time then id,
// and their total.
func (db *DB) Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error) {
	if offset < 0 {
		return nil, 0, fmt.Errorf("list workers: negative offset %d: %w", offset, engine.ErrInvalid)
	}
	workers, total, err := orderedPage(ctx, db, bucketWorkerOrder, countWorkers, getWorker, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list workers: %w", err)
	}
	return workers, total, nil
}

// orderedPage reads a page of the records an order bucket lists (keys
// of a time then an id, as idAfterTime reads them), skipping offset of
// them, at most limit (0 = defaultLimit), and the count the counts
// bucket keeps for them under countKey.
func orderedPage[T any](ctx context.Context, db *DB, order []byte, countKey string, get func(*bolt.Tx, string) (T, error), limit, offset int) ([]T, int, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		page  []T
		total int
	)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		total = int(readCount(tx.Bucket(bucketCounts), []byte(countKey)))
		c := tx.Bucket(order).Cursor()
		for k, _ := c.First(); k != nil && len(page) < limit; k, _ = c.Next() {
			if offset > 0 {
				offset--
				continue
			}
			r, err := get(tx, idAfterTime(k, 0))
			if err != nil {
				return err
			}
			page = append(page, r)
		}
		return nil
	})
	return page, total, err
}

// WorkerSteps returns the newest steps a worker claimed, at most limit
// (limit <= 0 means 50), each joined with its job, and their total.
func (db *DB) WorkerSteps(ctx context.Context, workerID string, limit int) ([]*engine.WorkerStep, int, error) {
	if limit <= 0 {
		limit = defaultLimit
	}
	prefix := strPrefix(workerID)
	var (
		out   []*engine.WorkerStep
		total int
	)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		total = int(readCount(tx.Bucket(bucketCounts), countWorkerSteps(workerID)))
		steps := tx.Bucket(bucketSteps)
		c := tx.Bucket(bucketWorkerSteps).Cursor()
		for k, v := seekLast(c, prefix); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Prev() {
			raw := steps.Get(v)
			if raw == nil {
				return fmt.Errorf("worker %s: indexed step is missing", workerID)
			}
			var s engine.Step
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("decode step of worker %s: %w", workerID, err)
			}
			ws := &engine.WorkerStep{
				JobID:        s.JobID,
				StepName:     s.Name,
				ActionType:   s.ActionType,
				Status:       s.Status,
				StartedAt:    s.StartedAt,
				CompletedAt:  s.CompletedAt,
				ErrorMessage: s.ErrorMessage,
			}
			// A job removed by retention leaves its step listed without the join.
			j, err := getJob(tx, s.JobID)
			switch {
			case err == nil:
				ws.Workspace, ws.TaskName, ws.AccessPath, ws.JobStatus = j.Workspace, j.TaskName, j.AccessPath, j.Status
			case !errors.Is(err, engine.ErrNotFound):
				return err
			}
			out = append(out, ws)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list steps of worker %s: %w", workerID, err)
	}
	return out, total, nil
}
