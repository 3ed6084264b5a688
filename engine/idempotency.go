package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
)

// MaxIdempotencyKey bounds an idempotency key's length in bytes.
const MaxIdempotencyKey = 200

// recentKeyTTL is how long the engine remembers a key it made a job
// with. The store finds older ones (KeyedJobs); the memory only covers a
// retry racing the first request's commit, which takes milliseconds.
const recentKeyTTL = 10 * time.Minute

// recentKeys maps the idempotency keys of the jobs made lately to their
// ids, on the loop: two requests with one key that both missed the store
// (the first not yet committed) meet here, and only one makes a job.
type recentKeys struct {
	ids  map[string]string
	seen map[string]time.Time
}

func (k *recentKeys) get(key string, now time.Time) (string, bool) {
	if key == "" {
		return "", false
	}
	id, ok := k.ids[key]
	if ok && now.Sub(k.seen[key]) > recentKeyTTL {
		return "", false
	}
	return id, ok
}

func (k *recentKeys) put(key, id string, now time.Time) {
	if key == "" {
		return
	}
	if k.ids == nil {
		k.ids, k.seen = map[string]string{}, map[string]time.Time{}
	}
	// Forget the expired keys now and then: the map stays as large as
	// the keys of the last TTL, however long the server runs.
	if len(k.ids) >= 1024 && len(k.ids)%1024 == 0 {
		for key, at := range k.seen {
			if now.Sub(at) > recentKeyTTL {
				delete(k.ids, key)
				delete(k.seen, key)
			}
		}
	}
	k.ids[key], k.seen[key] = id, now
}

// validKey refuses a key that cannot be stored or shown.
func validKey(key string) error {
	if len(key) > MaxIdempotencyKey {
		return fmt.Errorf("%w: idempotency key is %d bytes, at most %d", ErrInvalid, len(key), MaxIdempotencyKey)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: idempotency key holds a control or non-printable character", ErrInvalid)
		}
	}
	return nil
}

// jobForKey is the stored job a key made, or nil. A key whose job
// retention removed makes a new job.
func (e *Engine) jobForKey(ctx context.Context, key string) (*Job, error) {
	if err := validKey(key); err != nil {
		return nil, err
	}
	kj, ok := e.cfg.Store.(KeyedJobs)
	if !ok {
		return nil, nil
	}
	id, err := kj.JobByIdempotencyKey(ctx, key)
	if err != nil || id == "" {
		return nil, err
	}
	j, err := e.cfg.Store.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return j, err
}
