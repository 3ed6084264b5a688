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
	var j *engine.Job
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var err error
		j, err = getJob(tx, id)
		return err
	})
	return j, err
}

func getJob(tx *bolt.Tx, id string) (*engine.Job, error) {
	v := tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
	}
	var j engine.Job
	if err := json.Unmarshal(v, &j); err != nil {
		return nil, fmt.Errorf("decode job %s: %w", id, err)
	}
	return &j, nil
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

// Jobs returns a page of jobs, newest first, and the total matching the
// filter. It walks one index and decodes only the jobs of the page; the
// total is a maintained counter.
func (db *DB) Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error) {
	if f.TaskName != "" && f.Workspace == "" {
		return nil, 0, fmt.Errorf("list jobs: task filter %q needs a workspace: %w", f.TaskName, engine.ErrInvalid)
	}
	if f.Offset < 0 {
		return nil, 0, fmt.Errorf("list jobs: negative offset %d: %w", f.Offset, engine.ErrInvalid)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	bucket, prefix, counter := bucketByTime, []byte(nil), []byte(countJobs)
	switch {
	case f.TaskName != "":
		bucket, prefix, counter = bucketByTask, taskPrefix(f.Workspace, f.TaskName), countTask(f.Workspace, f.TaskName)
	case f.Workspace != "":
		bucket, prefix, counter = bucketByWorkspace, workspacePrefix(f.Workspace), countWorkspace(f.Workspace)
	}
	var (
		jobs  []*engine.Job
		total int
	)
	err := db.view(ctx, func(tx *bolt.Tx) error {
		var ids []string
		if scopes, hidden := visibleTasks(tx, f); hidden {
			// Some tasks are invisible: walk the visible tasks' indexes
			// merged, newest first; their counters sum to the total.
			for _, sc := range scopes {
				total += sc.count
			}
			ids = mergedNewestIDs(tx.Bucket(bucketByTask), scopes, f.Offset, limit)
		} else {
			total = int(readCount(tx.Bucket(bucketCounts), counter))
			ids = newestIDs(tx.Bucket(bucket).Cursor(), prefix, f.Offset, limit)
		}
		jobs = make([]*engine.Job, 0, len(ids))
		for _, id := range ids {
			j, err := getJob(tx, id)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, total, nil
}

// newestIDs walks the keys under prefix (each prefix + time + id) from the
// newest, skips offset of them and returns the ids of the next limit.
func newestIDs(c *bolt.Cursor, prefix []byte, offset, limit int) []string {
	var ids []string
	k, _ := seekLast(c, prefix)
	for ; k != nil && bytes.HasPrefix(k, prefix) && len(ids) < limit; k, _ = c.Prev() {
		if offset > 0 {
			offset--
			continue
		}
		ids = append(ids, idAfterTime(k, len(prefix)))
	}
	return ids
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
