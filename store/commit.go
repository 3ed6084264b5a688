package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// encoded is a record taken from a batch before the write starts: its
// key, its value and the index entries it should have. The write reads
// nothing of the record itself, which the engine changes again meanwhile.
type encoded struct {
	key, val []byte
	index    []indexEntry
	what     string // "job X", for errors
	ended    bool   // the record is in its last state: seldom written again
}

// A kind of record: where it goes and how it is keyed and indexed.
type recordKind[T any] struct {
	bucket   []byte
	validate func(*T) error
	key      func(*T) []byte
	indexes  func(*T) []indexEntry
	what     func(*T) string
	ended    func(*T) bool // see encoded.ended
	// previous decodes the stored record's index entries.
	previous func(val []byte) ([]indexEntry, error)
}

var (
	jobKind = recordKind[engine.Job]{
		bucket: bucketJobs, validate: validateJob, indexes: jobIndexes,
		key:   func(j *engine.Job) []byte { return []byte(j.ID) },
		what:  func(j *engine.Job) string { return "job " + j.ID },
		ended: func(j *engine.Job) bool { return j.Terminal() && !j.HooksPending },
		previous: func(val []byte) ([]indexEntry, error) {
			var p struct {
				engine.Job
				// Not needed for the indexes: kept raw, not decoded.
				Input  json.RawMessage `json:"input"`
				Output json.RawMessage `json:"output"`
			}
			err := json.Unmarshal(val, &p)
			return jobIndexes(&p.Job), err
		},
	}
	stepKind = recordKind[engine.Step]{
		bucket: bucketSteps, validate: validateStep, indexes: stepIndexes,
		key:   func(s *engine.Step) []byte { return stepKey(s.JobID, s.Seq, s.Name) },
		what:  func(s *engine.Step) string { return "step " + s.JobID + "/" + s.Name },
		ended: func(s *engine.Step) bool { return engine.StepTerminal(s.Status) },
		previous: func(val []byte) ([]indexEntry, error) {
			var p struct {
				engine.Step
				Item   json.RawMessage `json:"item,omitempty"`
				Input  json.RawMessage `json:"input"`
				Output json.RawMessage `json:"output"`
			}
			err := json.Unmarshal(val, &p)
			return stepIndexes(&p.Step), err
		},
	}
	workerKind = recordKind[engine.Worker]{
		bucket: bucketWorkers, validate: validateWorker, indexes: workerIndexes,
		key:   func(w *engine.Worker) []byte { return []byte(w.ID) },
		what:  func(w *engine.Worker) string { return "worker " + w.ID },
		ended: func(*engine.Worker) bool { return false },
		previous: func(val []byte) ([]indexEntry, error) {
			var p engine.Worker
			err := json.Unmarshal(val, &p)
			return workerIndexes(&p), err
		},
	}
)

// Commit writes the whole batch in one transaction, fsync'd before it returns.
func (db *DB) Commit(ctx context.Context, b *engine.Batch) error {
	write, err := db.PrepareCommit(b)
	if err != nil {
		return err
	}
	return write(ctx)
}

// PrepareCommit validates and encodes the batch's records; the returned
// write puts them in one transaction, fsync'd before it returns, and
// references nothing of the batch (engine.PreparingStore).
func (db *DB) PrepareCommit(b *engine.Batch) (func(context.Context) error, error) {
	if b == nil {
		return func(context.Context) error { return nil }, nil
	}
	jobs, err := encodeAll(b.Jobs, jobKind)
	if err != nil {
		return nil, err
	}
	steps, err := encodeAll(b.Steps, stepKind)
	if err != nil {
		return nil, err
	}
	workers, err := encodeAll(b.Workers, workerKind)
	if err != nil {
		return nil, err
	}
	fires, err := encodeFires(b.Fires)
	if err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	marks := slices.Clone(b.EventMarks)
	keys := jobKeys(b.Jobs)
	entries := slices.Clone(b.Audit)
	return func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			deltas := counts{}
			if err := putAll(tx, deltas, &db.written, jobs, jobKind); err != nil {
				return err
			}
			if err := putAll(tx, deltas, &db.written, steps, stepKind); err != nil {
				return err
			}
			if err := putAll(tx, deltas, &db.written, workers, workerKind); err != nil {
				return err
			}
			if err := deltas.write(tx); err != nil {
				return err
			}
			for _, f := range fires {
				if err := putFire(tx, f.key, f.val); err != nil {
					return err
				}
			}
			if err := putJobKeys(tx, keys); err != nil {
				return err
			}
			if err := db.appendAudit(tx, entries); err != nil {
				return err
			}
			return putEventMarks(tx, marks)
		})
		if err != nil {
			return fmt.Errorf("commit batch: %w", err)
		}
		return nil
	}, nil
}

func encodeAll[T any](recs []*T, kind recordKind[T]) ([]encoded, error) {
	out := make([]encoded, 0, len(recs))
	for _, r := range recs {
		if r == nil {
			continue
		}
		if err := kind.validate(r); err != nil {
			return nil, fmt.Errorf("commit batch: %w", err)
		}
		v, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("commit batch: encode %T: %w", r, err)
		}
		out = append(out, encoded{key: kind.key(r), val: v, index: kind.indexes(r), what: kind.what(r), ended: kind.ended(r)})
	}
	return out, nil
}

// putAll writes encoded records of one kind, moving their index entries
// from those of the records they replace (known from written when the
// stored bytes are those written last, decoded otherwise).
func putAll[T any](tx *bolt.Tx, deltas counts, written *lastWritten, recs []encoded, kind recordKind[T]) error {
	bucket := tx.Bucket(kind.bucket)
	for _, e := range recs {
		var old []indexEntry
		if prev := bucket.Get(e.key); prev != nil {
			var ok bool
			if old, ok = written.indexes(kind.bucket, e.key, prev); !ok {
				var err error
				if old, err = kind.previous(prev); err != nil {
					return fmt.Errorf("decode %s: %w", e.what, err)
				}
			}
		}
		if err := bucket.Put(e.key, e.val); err != nil {
			return fmt.Errorf("put %s: %w", e.what, err)
		}
		if err := moveIndexes(tx, deltas, old, e.index); err != nil {
			return err
		}
		written.remember(kind.bucket, e)
	}
	return nil
}

// lastWritten remembers the records the last commits wrote, by bucket and
// key, with their index entries: a running job or step is written again a
// few commits later, and the entries it had are then known without
// decoding its JSON (most of a commit's time, under a burst of steps).
// An entry counts only while the stored bytes are the ones remembered, so
// a write that failed, or a record changed by another path (a migration,
// an import), falls back to decoding. A record written in its last state
// (an ended job or step) is forgotten, so what it holds is about the
// records in flight, which the engine holds in memory anyway. Only
// bbolt's one writer uses it.
type lastWritten struct {
	recs  map[string]encoded
	bytes int
}

// maxLastWritten bounds the bytes of records lastWritten holds (a burst
// of thousands of jobs in flight); past it, it starts afresh.
const maxLastWritten = 8 << 20

func (l *lastWritten) indexes(bucket, key, stored []byte) ([]indexEntry, bool) {
	e, ok := l.recs[lastWrittenKey(bucket, key)]
	if !ok || !bytes.Equal(e.val, stored) {
		return nil, false
	}
	return e.index, true
}

func (l *lastWritten) remember(bucket []byte, e encoded) {
	k := lastWrittenKey(bucket, e.key)
	if prev, ok := l.recs[k]; ok {
		l.bytes -= len(prev.val)
		delete(l.recs, k)
	}
	if e.ended {
		return
	}
	if l.recs == nil || l.bytes+len(e.val) > maxLastWritten {
		l.recs, l.bytes = make(map[string]encoded), 0
	}
	l.recs[k] = e
	l.bytes += len(e.val)
}

func lastWrittenKey(bucket, key []byte) string {
	return string(bucket) + "\x00" + string(key)
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
		{"job id", j.ID}, {"workspace", j.Workspace}, {"task name", j.TaskName}, {"access path", j.AccessPath},
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
