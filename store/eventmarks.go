package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// bucketEvents holds the event sources' progress, written in the commit
// that creates the jobs their events make (see engine.Emit):
//
//	"m" job id step -> {"run": ..., "seq": N}  last line accepted from the step's run
//	"c" source      -> uint64                   events accepted from the trigger in all
//
// The parts are joined without a separator: job ids are fixed-length
// UUIDs, and a mark is read and deleted by its whole key, never by prefix.
// It is created on first write, so older databases open unchanged.
var bucketEvents = []byte("event_marks")

var _ engine.EventStore = (*DB)(nil)

type eventMarkRec struct {
	Run string `json:"run"`
	Seq int64  `json:"seq"`
}

func eventMarkKey(jobID, step string) []byte {
	return joinKey([]byte("m"), []byte(jobID), []byte(step))
}

func eventCountKey(source string) []byte {
	return joinKey([]byte("c"), []byte(source))
}

// putEventMarks writes a batch's marks; later ones of a step win.
func putEventMarks(tx *bolt.Tx, marks []engine.EventMark) error {
	if len(marks) == 0 {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketEvents)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketEvents, err)
	}
	for _, m := range marks {
		v, err := json.Marshal(eventMarkRec{Run: m.Run, Seq: m.Seq})
		if err != nil {
			return err
		}
		if err := b.Put(eventMarkKey(m.JobID, m.Step), v); err != nil {
			return err
		}
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(m.Consumed))
		if err := b.Put(eventCountKey(m.Source), n[:]); err != nil {
			return err
		}
	}
	return nil
}

// deleteEventMarks deletes the marks of a swept job's steps (a consumer
// job's), which nothing reads once the job is gone. The sources' counts
// stay: they are the triggers', one key each.
func deleteEventMarks(tx *bolt.Tx, jobID string, steps []string) error {
	b := tx.Bucket(bucketEvents)
	if b == nil {
		return nil
	}
	for _, step := range steps {
		if err := b.Delete(eventMarkKey(jobID, step)); err != nil {
			return fmt.Errorf("delete event mark of %s/%s: %w", jobID, step, err)
		}
	}
	return nil
}

// EventMark returns the last line accepted from a consumer step's run.
func (db *DB) EventMark(ctx context.Context, jobID, step string) (run string, seq int64, err error) {
	err = db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		if b == nil {
			return nil
		}
		v := b.Get(eventMarkKey(jobID, step))
		if v == nil {
			return nil
		}
		var rec eventMarkRec
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("decode event mark of %s/%s: %w", jobID, step, err)
		}
		run, seq = rec.Run, rec.Seq
		return nil
	})
	return run, seq, err
}

// EventsConsumed returns how many events a trigger has had accepted.
func (db *DB) EventsConsumed(ctx context.Context, source string) (int64, error) {
	var n int64
	err := db.view(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		if b == nil {
			return nil
		}
		if v := b.Get(eventCountKey(source)); len(v) == 8 {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}
