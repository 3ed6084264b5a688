package auth

import (
	linked "container/list"
	"crypto/sha256"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is an event rate: Events per Per, in a burst of up to Events.
type Rate struct {
	Events int
	Per    time.Duration
}

// maxLimiterKeys bounds every keyed limiter: a few hundred bytes a key, so
// at most some tens of MB however many distinct keys a flood invents.
const maxLimiterKeys = 50_000

// lruMap is a map whose entries are forgotten once unused for idle, and
// least recently used first beyond max, so no input can grow it without
// bound. It is not safe for concurrent use.
type lruMap[V any] struct {
	idle  time.Duration
	max   int
	order *linked.List // of *lruEntry[V], most recently used first
	byKey map[string]*linked.Element
}

type lruEntry[V any] struct {
	key   string
	value V
	used  time.Time
}

func newLRUMap[V any](idle time.Duration, max int) *lruMap[V] {
	return &lruMap[V]{idle: idle, max: max, order: linked.New(), byKey: map[string]*linked.Element{}}
}

// mapKey keeps a key's memory small whatever its length: a long one (an
// attacker's megabyte "email") is kept as its SHA-256.
func mapKey(key string) string {
	if len(key) <= sha256.Size*2 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return string(sum[:])
}

// get returns key's value, made by create when it has none, and marks it
// used at now.
func (m *lruMap[V]) get(key string, now time.Time, create func() V) V {
	m.evictIdle(now)
	key = mapKey(key)
	if el, ok := m.byKey[key]; ok {
		e := el.Value.(*lruEntry[V])
		e.used = now
		m.order.MoveToFront(el)
		return e.value
	}
	e := &lruEntry[V]{key: key, value: create(), used: now}
	m.byKey[key] = m.order.PushFront(e)
	for m.order.Len() > m.max {
		m.remove(m.order.Back())
	}
	return e.value
}

func (m *lruMap[V]) delete(key string) {
	if el, ok := m.byKey[mapKey(key)]; ok {
		m.remove(el)
	}
}

func (m *lruMap[V]) evictIdle(now time.Time) {
	for el := m.order.Back(); el != nil && now.Sub(el.Value.(*lruEntry[V]).used) >= m.idle; el = m.order.Back() {
		m.remove(el)
	}
}

func (m *lruMap[V]) remove(el *linked.Element) {
	m.order.Remove(el)
	delete(m.byKey, el.Value.(*lruEntry[V]).key)
}

// keyedLimiter is a token bucket per key (an account, an address). A key
// idle for as long as its bucket takes to refill is forgotten: a new
// bucket is the same as that full one, so forgetting loses nothing.
type keyedLimiter struct {
	mu    sync.Mutex
	rate  Rate
	now   func() time.Time
	byKey *lruMap[*rate.Limiter]
}

func newKeyedLimiter(r Rate, now func() time.Time) *keyedLimiter {
	return &keyedLimiter{rate: r, now: now, byKey: newLRUMap[*rate.Limiter](r.Per, maxLimiterKeys)}
}

// take spends one event of key's budget and returns 0, or when the budget
// is spent returns how long until it allows one (spending nothing).
func (k *keyedLimiter) take(key string) time.Duration {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	lim := k.byKey.get(key, now, func() *rate.Limiter {
		return rate.NewLimiter(rate.Every(k.rate.Per/time.Duration(k.rate.Events)), k.rate.Events)
	})
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// forget gives key a full budget again.
func (k *keyedLimiter) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byKey.delete(key)
}
