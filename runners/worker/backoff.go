package worker

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff is a capped exponential delay with jitter, so many workers losing
// the server at once do not come back in lockstep.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func newBackoff(min, max time.Duration) *backoff {
	return &backoff{min: min, max: max, next: min}
}

// wait sleeps for the next delay or until ctx ends; false means ctx ended.
func (b *backoff) wait(ctx context.Context) bool {
	d := b.next
	b.next = min(b.next*2, b.max)
	// Full jitter over the upper half keeps a floor, so it never spins.
	d = d/2 + rand.N(d/2+1)
	return sleep(ctx, d)
}

func (b *backoff) reset() { b.next = b.min }

// sleep waits for d or until ctx ends; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
