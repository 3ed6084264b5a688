package store

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// bucketTriggers holds each scheduler trigger's last fire time:
// workspace \0 trigger name -> RFC 3339 (nanoseconds, UTC). It is created on
// first write, so databases from before triggers open unchanged.
var bucketTriggers = []byte("triggers")

// LastFire returns when a workspace's trigger last fired, and false when it
// never has (or nothing was recorded).
func (db *DB) LastFire(ws, trigger string) (time.Time, bool, error) {
	key, err := triggerKey(ws, trigger)
	if err != nil {
		return time.Time{}, false, err
	}
	var at time.Time
	var found bool
	err = db.view(context.Background(), func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTriggers)
		if b == nil {
			return nil
		}
		v := b.Get(key)
		if v == nil {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, string(v))
		if err != nil {
			return fmt.Errorf("decode last fire of trigger %s/%s: %w", ws, trigger, err)
		}
		at, found = t, true
		return nil
	})
	if err != nil {
		return time.Time{}, false, err
	}
	return at, found, nil
}

// SetLastFire records, durably, when a workspace's trigger last fired.
func (db *DB) SetLastFire(ws, trigger string, t time.Time) error {
	key, err := triggerKey(ws, trigger)
	if err != nil {
		return err
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		return putFire(tx, key, fireValue(t))
	})
	if err != nil {
		return fmt.Errorf("record last fire of trigger %s/%s: %w", ws, trigger, err)
	}
	return nil
}

// encodedFire is a trigger fire ready for putFire.
type encodedFire struct{ key, val []byte }

// encodeFires checks and encodes a batch's trigger fires before the write
// transaction starts.
func encodeFires(fires []engine.TriggerFire) ([]encodedFire, error) {
	out := make([]encodedFire, 0, len(fires))
	for _, f := range fires {
		key, err := triggerKey(f.Workspace, f.Trigger)
		if err != nil {
			return nil, err
		}
		out = append(out, encodedFire{key: key, val: fireValue(f.At)})
	}
	return out, nil
}

func fireValue(t time.Time) []byte { return []byte(t.UTC().Format(time.RFC3339Nano)) }

func putFire(tx *bolt.Tx, key, val []byte) error {
	b, err := tx.CreateBucketIfNotExists(bucketTriggers)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketTriggers, err)
	}
	if err := b.Put(key, val); err != nil {
		return fmt.Errorf("put trigger fire: %w", err)
	}
	return nil
}

func triggerKey(ws, trigger string) ([]byte, error) {
	if ws == "" || trigger == "" {
		return nil, fmt.Errorf("trigger state needs a workspace and a trigger name, got %q and %q: %w", ws, trigger, engine.ErrInvalid)
	}
	if err := noSep("workspace", ws); err != nil {
		return nil, err
	}
	if err := noSep("trigger name", trigger); err != nil {
		return nil, err
	}
	return joinKey(strPrefix(ws), []byte(trigger)), nil
}
