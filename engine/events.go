package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Job events tell live lists (the UI's dashboard, jobs and task pages)
// that a job was created or changed status, once the change is committed.
// The loop publishes them without ever waiting: each subscriber has a
// bounded buffer, and one that falls behind is dropped and told so (it
// reloads its list and subscribes again).

// Job changes an event reports.
const (
	JobCreated       = "created"
	JobStatusChanged = "status"
)

// JobEvent is one committed change of a job: the job's list fields, never
// its input or output.
type JobEvent struct {
	Change string // JobCreated or JobStatusChanged
	Job    Job    // a copy; Input and Output are nil
}

// DefaultJobEventBuffer is how many events a subscriber may have waiting.
const DefaultJobEventBuffer = 256

// JobSubscription receives job events until Close, or until it fell behind.
type JobSubscription struct {
	ch   chan JobEvent
	feed *jobFeed
	lost atomic.Bool
}

// Events delivers the events in commit order. It is closed by Close, or
// when the subscriber fell behind (Lost): events were dropped since.
func (s *JobSubscription) Events() <-chan JobEvent { return s.ch }

// Lost reports whether Events was closed because the subscriber fell
// behind: its list may be stale and should be reloaded.
func (s *JobSubscription) Lost() bool { return s.lost.Load() }

// Close ends the subscription; it may be called more than once.
func (s *JobSubscription) Close() { s.feed.remove(s, false) }

// jobFeed fans committed job changes out to subscribers.
type jobFeed struct {
	mu     sync.Mutex
	subs   map[*JobSubscription]struct{}
	closed bool // the engine stopped: subscriptions end at once
	// last is the status last published of each live job; only the loop
	// reads and writes it.
	last map[string]string
}

func newJobFeed() *jobFeed {
	return &jobFeed{subs: map[*JobSubscription]struct{}{}, last: map[string]string{}}
}

// SubscribeJobs starts receiving job events, buffer of them at most
// waiting (0 = DefaultJobEventBuffer). Close the subscription when done.
// Once the engine has stopped, Events is closed (and not Lost).
func (e *Engine) SubscribeJobs(buffer int) *JobSubscription {
	if buffer <= 0 {
		buffer = DefaultJobEventBuffer
	}
	s := &JobSubscription{ch: make(chan JobEvent, buffer), feed: e.feed}
	e.feed.mu.Lock()
	defer e.feed.mu.Unlock()
	if e.feed.closed {
		close(s.ch)
		return s
	}
	e.feed.subs[s] = struct{}{}
	return s
}

// close ends every subscription: the engine stopped.
func (f *jobFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for s := range f.subs {
		delete(f.subs, s)
		close(s.ch)
	}
}

func (f *jobFeed) remove(s *JobSubscription, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.subs[s]; !ok {
		return
	}
	delete(f.subs, s)
	if lost {
		s.lost.Store(true)
	}
	close(s.ch)
}

// publish sends the jobs of a committed batch that were created or
// changed status. Called by the loop only; it never blocks.
func (f *jobFeed) publish(b *batch) {
	if len(b.jobList) == 0 {
		return
	}
	f.mu.Lock()
	listening := len(f.subs) > 0
	f.mu.Unlock()
	created := make(map[*Job]bool, len(b.newJobs))
	for _, j := range b.newJobs {
		created[j] = true
	}
	var events []JobEvent
	for _, j := range b.jobList {
		change := JobStatusChanged
		if created[j] {
			change = JobCreated
		} else if prev, ok := f.last[j.ID]; ok && prev == j.Status {
			continue
		}
		if JobTerminal(j.Status) {
			delete(f.last, j.ID)
		} else {
			f.last[j.ID] = j.Status
		}
		if listening {
			events = append(events, JobEvent{Change: change, Job: listCopy(j)})
		}
	}
	if len(events) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		for _, ev := range events {
			select {
			case s.ch <- ev:
				continue
			default:
			}
			// Full: drop the subscriber rather than wait for it.
			delete(f.subs, s)
			s.lost.Store(true)
			close(s.ch)
			break
		}
	}
}

// listCopy is the job without its input and output, sharing nothing the
// loop changes later.
func listCopy(j *Job) Job {
	c := *j
	c.Input, c.Output = nil, nil
	c.StartedAt = copyTime(j.StartedAt)
	c.CompletedAt = copyTime(j.CompletedAt)
	c.Deadline = copyTime(j.Deadline)
	c.SourceID = copyString(j.SourceID)
	return c
}

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}
