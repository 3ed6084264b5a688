package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Job returns a job by id (engine.ErrNotFound).
func (db *DB) Job(ctx context.Context, id string) (*engine.Job, error) {
	return viewRecord(ctx, db, getJob, id)
}

// viewRecord reads one record with get in a read transaction.
func viewRecord[T any](ctx context.Context, db *DB, get func(*bolt.Tx, string) (T, error), id string) (T, error) {
	var r T
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		r, err = get(tx, id)
		return err
	})
	return r, err
}

// getRecord reads the JSON record id of bucket: what names it in the
// errors, notFound is the error of an id the bucket does not hold.
func getRecord[T any](tx *bolt.Tx, bucket []byte, what, id string, notFound error) (*T, error) {
	v := tx.Bucket(bucket).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("%s %s: %w", what, id, notFound)
	}
	var r T
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", what, id, err)
	}
	return &r, nil
}

func getJob(tx *bolt.Tx, id string) (*engine.Job, error) {
	return getRecord[engine.Job](tx, bucketJobs, "job", id, engine.ErrNotFound)
}

// Steps returns a job's steps ordered by Seq (none for an unknown job).
func (db *DB) Steps(ctx context.Context, jobID string) ([]*engine.Step, error) {
	var steps []*engine.Step
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		steps, err = jobSteps(tx, jobID)
		return err
	})
	return steps, err
}

// jobSteps is a prefix scan: step keys sort by job, then Seq.
func jobSteps(tx *bolt.Tx, jobID string) ([]*engine.Step, error) {
	var steps []*engine.Step
	prefix := stepsPrefix(jobID)
	c := tx.Bucket(bucketSteps).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var s engine.Step
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, fmt.Errorf("decode step of job %s: %w", jobID, err)
		}
		steps = append(steps, &s)
	}
	return steps, nil
}

// seekLast positions c on the last key with the prefix (or on a key before
// it when there is none; callers check the prefix).
func seekLast(c *bolt.Cursor, prefix []byte) (key, value []byte) {
	end := prefixEnd(prefix)
	if end == nil {
		return c.Last()
	}
	if k, _ := c.Seek(end); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// LoadActive returns every non-terminal job, and every terminal one whose
// hooks are pending, with all its steps, and all workers. It reads the
// active index, never the whole jobs bucket.
func (db *DB) LoadActive(ctx context.Context) ([]*engine.Job, []*engine.Step, []*engine.Worker, error) {
	var (
		jobs    []*engine.Job
		steps   []*engine.Step
		workers []*engine.Worker
	)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketActive).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			j, err := getJob(tx, string(k))
			if err != nil {
				return err
			}
			s, err := jobSteps(tx, j.ID)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
			steps = append(steps, s...)
		}
		return tx.Bucket(bucketWorkers).ForEach(func(k, v []byte) error {
			var w engine.Worker
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("decode worker %s: %w", k, err)
			}
			workers = append(workers, &w)
			return nil
		})
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("load active state: %w", err)
	}
	return jobs, steps, workers, nil
}
