package audit

import "sync"

// DefaultQueueLen bounds the entries waiting for a commit: denied
// requests and failed sign-ins change nothing, so they ride the next
// commit of the orchestrator loop rather than making one each, and a
// flood of them can neither grow memory nor slow the loop.
const DefaultQueueLen = 1024

// Queue holds entries until the next commit takes them. When full it
// drops what comes and counts it; the next entry queued says how many
// were dropped before it (Entry.Dropped), so the gap is on the record.
type Queue struct {
	mu      sync.Mutex
	max     int
	entries []Entry
	dropped int64 // since the last entry queued
	total   int64 // ever
	wake    func()
}

// NewQueue makes a queue of at most max entries (DefaultQueueLen if
// max <= 0).
func NewQueue(max int) *Queue {
	if max <= 0 {
		max = DefaultQueueLen
	}
	return &Queue{max: max}
}

// OnPush sets what Push calls after queueing (the loop's wake-up); it
// must not block.
func (q *Queue) OnPush(f func()) {
	q.mu.Lock()
	q.wake = f
	q.mu.Unlock()
}

// Push queues e, or drops and counts it when the queue is full; it never
// blocks.
func (q *Queue) Push(e Entry) bool {
	q.mu.Lock()
	if len(q.entries) >= q.max {
		q.dropped++
		q.total++
		q.mu.Unlock()
		return false
	}
	e.Dropped = q.dropped
	q.dropped = 0
	q.entries = append(q.entries, e)
	wake := q.wake
	q.mu.Unlock()
	if wake != nil {
		wake()
	}
	return true
}

// Take removes and returns every queued entry.
func (q *Queue) Take() []Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.entries
	q.entries = nil
	return out
}

// Len is how many entries wait.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.entries)
}

// Dropped is how many entries the queue ever dropped.
func (q *Queue) Dropped() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}
