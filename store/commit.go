package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// encoded is a record marshalled before the write transaction starts, so the
// single writer holds the lock only for the puts, and nothing of the batch
// is referenced after Commit returns.
type encoded[T any] struct {
	rec *T
	val []byte
}

// Commit writes the whole batch in one transaction, fsync'd before it returns.
func (db *DB) Commit(ctx context.Context, b *engine.Batch) error {
	if b == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	jobs, err := encodeAll(b.Jobs, validateJob)
	if err != nil {
		return err
	}
	steps, err := encodeAll(b.Steps, validateStep)
	if err != nil {
		return err
	}
	workers, err := encodeAll(b.Workers, validateWorker)
	if err != nil {
		return err
	}
	fires, err := encodeFires(b.Fires)
	if err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		for _, e := range jobs {
			if err := putJob(tx, e.rec, e.val); err != nil {
				return err
			}
		}
		for _, e := range steps {
			if err := putStep(tx, e.rec, e.val); err != nil {
				return err
			}
		}
		for _, e := range workers {
			if err := putWorker(tx, e.rec, e.val); err != nil {
				return err
			}
		}
		for _, f := range fires {
			if err := putFire(tx, f.key, f.val); err != nil {
				return err
			}
		}
		return putEventMarks(tx, b.EventMarks)
	})
	if err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
}

func encodeAll[T any](recs []*T, validate func(*T) error) ([]encoded[T], error) {
	out := make([]encoded[T], 0, len(recs))
	for _, r := range recs {
		if r == nil {
			continue
		}
		if err := validate(r); err != nil {
			return nil, fmt.Errorf("commit batch: %w", err)
		}
		v, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("commit batch: encode %T: %w", r, err)
		}
		out = append(out, encoded[T]{rec: r, val: v})
	}
	return out, nil
}

// noSep rejects names that would break the separator-joined index keys.
func noSep(what, s string) error {
	if strings.IndexByte(s, sep) >= 0 {
		return fmt.Errorf("%s %q contains a NUL byte: %w", what, s, engine.ErrInvalid)
	}
	return nil
}

func validateJob(j *engine.Job) error {
	if j.ID == "" {
		return fmt.Errorf("job without id: %w", engine.ErrInvalid)
	}
	for _, f := range []struct{ what, v string }{
		{"job id", j.ID}, {"workspace", j.Workspace}, {"task name", j.TaskName},
		{"source type", j.SourceType}, {"source id", sourceID(j)},
	} {
		if err := noSep(f.what, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validateStep(s *engine.Step) error {
	if s.JobID == "" || s.Name == "" {
		return fmt.Errorf("step %q of job %q: job id and name are required: %w", s.Name, s.JobID, engine.ErrInvalid)
	}
	if err := noSep("job id", s.JobID); err != nil {
		return err
	}
	if s.WorkerID != nil {
		return noSep("worker id", *s.WorkerID)
	}
	return nil
}

func validateWorker(w *engine.Worker) error {
	if w.ID == "" {
		return fmt.Errorf("worker without id: %w", engine.ErrInvalid)
	}
	return noSep("worker id", w.ID)
}

func putJob(tx *bolt.Tx, j *engine.Job, val []byte) error {
	jobs := tx.Bucket(bucketJobs)
	var old []indexEntry
	if prev := jobs.Get([]byte(j.ID)); prev != nil {
		var p engine.Job
		if err := json.Unmarshal(prev, &p); err != nil {
			return fmt.Errorf("decode job %s: %w", j.ID, err)
		}
		old = jobIndexes(&p)
	}
	if err := jobs.Put([]byte(j.ID), val); err != nil {
		return fmt.Errorf("put job %s: %w", j.ID, err)
	}
	return moveIndexes(tx, old, jobIndexes(j))
}

func putStep(tx *bolt.Tx, s *engine.Step, val []byte) error {
	steps := tx.Bucket(bucketSteps)
	key := stepKey(s.JobID, s.Seq, s.Name)
	var old []indexEntry
	if prev := steps.Get(key); prev != nil {
		var p engine.Step
		if err := json.Unmarshal(prev, &p); err != nil {
			return fmt.Errorf("decode step %s/%s: %w", s.JobID, s.Name, err)
		}
		old = stepIndexes(&p)
	}
	if err := steps.Put(key, val); err != nil {
		return fmt.Errorf("put step %s/%s: %w", s.JobID, s.Name, err)
	}
	return moveIndexes(tx, old, stepIndexes(s))
}

func putWorker(tx *bolt.Tx, w *engine.Worker, val []byte) error {
	workers := tx.Bucket(bucketWorkers)
	var old []indexEntry
	if prev := workers.Get([]byte(w.ID)); prev != nil {
		var p engine.Worker
		if err := json.Unmarshal(prev, &p); err != nil {
			return fmt.Errorf("decode worker %s: %w", w.ID, err)
		}
		old = workerIndexes(&p)
	}
	if err := workers.Put([]byte(w.ID), val); err != nil {
		return fmt.Errorf("put worker %s: %w", w.ID, err)
	}
	return moveIndexes(tx, old, workerIndexes(w))
}
