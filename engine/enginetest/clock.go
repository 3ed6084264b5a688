package enginetest

import (
	"sort"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// Clock is a fake engine.Clock: time moves only when Advance is called,
// and due callbacks run then, in deadline order.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[*timer]struct{}
}

type timer struct {
	c    *Clock
	when time.Time
	seq  int
	f    func()
}

// NewClock returns a clock stopped at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, timers: map[*timer]struct{}{}}
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f at Now()+d. A non-positive d runs f at once, in its
// own goroutine, as time.AfterFunc does.
func (c *Clock) AfterFunc(d time.Duration, f func()) engine.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, when: c.now.Add(d), seq: c.seq, f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers[t] = struct{}{}
	return t
}

// Stop cancels the timer; it reports whether the timer was still pending.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if _, ok := t.c.timers[t]; !ok {
		return false
	}
	delete(t.c.timers, t)
	return true
}

// Advance moves time on by d and runs every callback that fell due. The
// callbacks run after the clock's lock is released, so they may use it.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*timer
	for t := range c.timers {
		if !t.when.After(c.now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if !due[i].when.Equal(due[j].when) {
			return due[i].when.Before(due[j].when)
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		t.f()
	}
}

// Pending counts the timers waiting to fire.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
