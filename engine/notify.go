package engine

import (
	"context"
	"sync"
)

// notifier holds each live job's cancellation and done channel. Callers read
// it without going through the loop; only the loop adds them (as it
// creates the job) and closes them (once the job's end is committed).
type notifier struct {
	mu   sync.Mutex
	jobs map[string]*jobChans
}

type jobChans struct {
	// cancelled ends when the job is cancelled: a context rather than a
	// channel, so a running step can have a function called then
	// (context.AfterFunc) without a goroutine waiting for it.
	cancelled context.Context
	cancel    context.CancelFunc
	done      chan struct{}
}

func newNotifier() *notifier { return &notifier{jobs: map[string]*jobChans{}} }

func (n *notifier) add(jobID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.jobs[jobID]; !ok {
		cancelled, cancel := context.WithCancel(context.Background())
		n.jobs[jobID] = &jobChans{cancelled: cancelled, cancel: cancel, done: make(chan struct{})}
	}
}

func (n *notifier) get(jobID string) (*jobChans, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.jobs[jobID]
	return c, ok
}

// finish closes a terminal job's channels and forgets them: later callers
// read the committed status from the store instead.
func (n *notifier) finish(jobID string, cancelled bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.jobs[jobID]
	if !ok {
		return
	}
	if cancelled {
		c.cancel()
	}
	close(c.done)
	delete(n.jobs, jobID)
}

// ids lists the jobs with channels, for reconciling after a reload.
func (n *notifier) ids() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	ids := make([]string, 0, len(n.jobs))
	for id := range n.jobs {
		ids = append(ids, id)
	}
	return ids
}
