package engine

import "sync"

// notifier holds each live job's cancelled and done channels. Callers read
// it without going through the loop; only the loop adds them (as it
// creates the job) and closes them (once the job's end is committed).
type notifier struct {
	mu   sync.Mutex
	jobs map[string]*jobChans
}

type jobChans struct {
	cancelled chan struct{}
	done      chan struct{}
}

func newNotifier() *notifier { return &notifier{jobs: map[string]*jobChans{}} }

func (n *notifier) add(jobID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.jobs[jobID]; !ok {
		n.jobs[jobID] = &jobChans{cancelled: make(chan struct{}), done: make(chan struct{})}
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
		close(c.cancelled)
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
