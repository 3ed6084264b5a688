package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// The job feed tells live lists (the UI's dashboard, jobs and task pages)
// that a job was created or changed status, once the change is committed:
// one FeedItem per change.
// The loop publishes the items without ever waiting: each subscriber has a
// bounded buffer, and one that falls behind is dropped and told so (it
// reloads its list and subscribes again).

//
// A subscriber may follow one job (SubscribeJobFeed): it then receives that
// job's items and its step items (a step record changed status,
// attempt or retry time), and no other job's. Step items are made only
// for jobs someone follows, so a big for_each job costs nothing more
// while no page shows it, and list subscribers never see them.

// Job changes a feed item reports.
const (
	JobCreated       = "created"
	JobStatusChanged = "status"
	StepChanged      = "step" // to subscribers of the step's job only
)

// FeedItem is one committed change of a job: the job's list fields, never
// its input or output. A StepChanged item's Job holds only the job's ID,
// Workspace, TaskName and AccessPath, and Step says what the step now is.
type FeedItem struct {
	Change string    // JobCreated, JobStatusChanged or StepChanged
	Job    Job       // a copy; Input and Output are nil
	Step   *FeedStep // StepChanged only
}

// FeedStep is a step record's list fields: no input, output or error
// text (a page that wants them fetches the job).
type FeedStep struct {
	Name        string
	Status      string
	WorkerID    *string
	StartedAt   *time.Time
	CompletedAt *time.Time
	Attempt     int // 1-based
	RetryAt     *time.Time
}

// stepSig is what a step item reports a change of.
type stepSig struct {
	status  string
	attempt int
	retryAt time.Time
}

// DefaultFeedBuffer is how many items a subscriber may have waiting.
const DefaultFeedBuffer = 256

// FeedSubscription receives feed items until Close, or until it fell behind.
type FeedSubscription struct {
	job  string // the job followed; "" for every job's feed items
	ch   chan FeedItem
	feed *jobFeed
	lost atomic.Bool
}

// Items delivers the feed in commit order. It is closed by Close, or
// when the subscriber fell behind (Lost): items were dropped since.
func (s *FeedSubscription) Items() <-chan FeedItem { return s.ch }

// Lost reports whether Items was closed because the subscriber fell
// behind: its list may be stale and should be reloaded.
func (s *FeedSubscription) Lost() bool { return s.lost.Load() }

// Close ends the subscription; it may be called more than once.
func (s *FeedSubscription) Close() { s.feed.remove(s, false) }

// jobFeed fans committed job changes out to subscribers.
type jobFeed struct {
	mu     sync.Mutex
	subs   map[*FeedSubscription]struct{}            // of every job's feed items
	byJob  map[string]map[*FeedSubscription]struct{} // following one job
	closed bool                                      // the engine stopped: subscriptions end at once
	// last is the status last published of each live job; only the loop
	// reads and writes it.
	last map[string]string
	// steps is what was last published of each step of the followed
	// jobs; only the loop reads and writes it.
	steps map[string]map[string]stepSig
}

func newJobFeed() *jobFeed {
	return &jobFeed{
		subs:  map[*FeedSubscription]struct{}{},
		byJob: map[string]map[*FeedSubscription]struct{}{},
		last:  map[string]string{},
		steps: map[string]map[string]stepSig{},
	}
}

// SubscribeFeed starts receiving feed items, buffer of them at most
// waiting (0 = DefaultFeedBuffer). Close the subscription when done.
// Once the engine has stopped, Items is closed (and not Lost).
func (e *Engine) SubscribeFeed(buffer int) *FeedSubscription {
	return e.subscribe("", buffer)
}

// EndedFeed is a subscription that has already ended (Items closed, not
// Lost): the answer of a replica that runs no engine, whose streams end
// at once so their clients reconnect to the one that does.
func EndedFeed() *FeedSubscription {
	f := newJobFeed()
	f.closed = true
	return f.subscribe("", 0)
}

// SubscribeJobFeed is SubscribeFeed for one job: its feed items and its step
// items (StepChanged), in commit order; of one commit, the jobs created
// come first and the jobs' status changes last. The first change of each step after subscribing is
// reported even if its status is the one it had.
func (e *Engine) SubscribeJobFeed(jobID string, buffer int) *FeedSubscription {
	return e.subscribe(jobID, buffer)
}

// subscribe registers the subscription in the loop, and returns once the
// batch it joined is durable: every batch the loop had taken before it is
// durable too, so what the subscriber reads from the store next is at
// least as new as the first item it can miss (items are taken from a
// batch when it goes to the store, see collect).
func (e *Engine) subscribe(jobID string, buffer int) *FeedSubscription {
	v, err := e.do(context.Background(), func(*batch) (any, error) { return e.feed.subscribe(jobID, buffer), nil })
	if err != nil {
		// The engine stopped: the subscription ends at once.
		return e.feed.subscribe(jobID, buffer)
	}
	return v.(*FeedSubscription)
}

func (f *jobFeed) subscribe(job string, buffer int) *FeedSubscription {
	if buffer <= 0 {
		buffer = DefaultFeedBuffer
	}
	s := &FeedSubscription{job: job, ch: make(chan FeedItem, buffer), feed: f}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(s.ch)
		return s
	}
	if job == "" {
		f.subs[s] = struct{}{}
		return s
	}
	if f.byJob[job] == nil {
		f.byJob[job] = map[*FeedSubscription]struct{}{}
	}
	f.byJob[job][s] = struct{}{}
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
	for job, subs := range f.byJob {
		delete(f.byJob, job)
		for s := range subs {
			close(s.ch)
		}
	}
}

func (f *jobFeed) remove(s *FeedSubscription, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop(s, lost)
}

// drop ends s, if it is still subscribed; f.mu is held.
func (f *jobFeed) drop(s *FeedSubscription, lost bool) {
	if s.job == "" {
		if _, ok := f.subs[s]; !ok {
			return
		}
		delete(f.subs, s)
	} else {
		subs := f.byJob[s.job]
		if _, ok := subs[s]; !ok {
			return
		}
		delete(subs, s)
		if len(subs) == 0 {
			delete(f.byJob, s.job)
		}
	}
	if lost {
		s.lost.Store(true)
	}
	close(s.ch)
}

// feedBatch is one batch's feed items, taken when the batch goes to the store
// (its records change again as the loop goes on) and sent once durable.
type feedBatch struct {
	listItems []FeedItem            // for every job's subscribers
	perJob    map[string][]FeedItem // for the subscribers of each followed job
}

// collect takes the feed items of a batch: the jobs that were created or
// changed status, and the changed steps of followed jobs; jobOf is a live
// job by ID (nil if unknown). Called by the loop only, in commit order;
// nil when there is nothing to send.
func (f *jobFeed) collect(b *batch, jobOf func(id string) *Job, place func(*Job) int) *feedBatch {
	if len(b.jobList) == 0 && len(b.stepList) == 0 {
		return nil
	}
	f.mu.Lock()
	listening := len(f.subs) > 0
	var followed map[string]bool
	if len(f.byJob) > 0 {
		followed = make(map[string]bool, len(f.byJob))
		for id := range f.byJob {
			followed[id] = true
		}
	}
	f.mu.Unlock()
	for id := range f.steps {
		if !followed[id] {
			delete(f.steps, id) // nobody follows it any more
		}
	}

	created := make(map[*Job]bool, len(b.newJobs))
	for _, j := range b.newJobs {
		created[j] = true
	}
	// Jobs created, then the steps changed, then jobs changed status: a
	// job's end comes after its last step's.
	var items, changed []FeedItem
	for _, j := range b.jobList {
		// A queued job leaving its line is a change too, though it stays
		// pending until its first step starts.
		sig := j.Status
		if j.Queued() {
			sig += "+queued"
		}
		change := JobStatusChanged
		if created[j] {
			change = JobCreated
		} else if prev, ok := f.last[j.ID]; ok && prev == sig {
			continue
		}
		if JobTerminal(j.Status) {
			delete(f.last, j.ID)
		} else {
			f.last[j.ID] = sig
		}
		if !listening && !followed[j.ID] {
			continue
		}
		item := FeedItem{Change: change, Job: listCopy(j)}
		if j.Queued() {
			q := *j.Queue
			q.Position = place(j)
			item.Job.Queue = &q
		}
		if change == JobCreated {
			items = append(items, item)
		} else {
			changed = append(changed, item)
		}
	}
	if followed != nil {
		for _, st := range b.stepList {
			if !followed[st.JobID] {
				continue
			}
			sig := stepSig{status: st.Status, attempt: st.AttemptNumber()}
			if st.RetryAt != nil {
				sig.retryAt = *st.RetryAt
			}
			seen := f.steps[st.JobID]
			if seen == nil {
				seen = map[string]stepSig{}
				f.steps[st.JobID] = seen
			}
			if prev, ok := seen[st.Name]; ok && prev == sig {
				continue
			}
			seen[st.Name] = sig
			ref := Job{ID: st.JobID}
			if j := jobOf(st.JobID); j != nil {
				ref.Workspace, ref.TaskName, ref.AccessPath = j.Workspace, j.TaskName, j.AccessPath
			}
			items = append(items, FeedItem{Change: StepChanged, Job: ref, Step: &FeedStep{
				Name:        st.Name,
				Status:      st.Status,
				WorkerID:    copyString(st.WorkerID),
				StartedAt:   copyTime(st.StartedAt),
				CompletedAt: copyTime(st.CompletedAt),
				Attempt:     sig.attempt,
				RetryAt:     copyTime(st.RetryAt),
			}})
		}
	}
	items = append(items, changed...)
	if len(items) == 0 {
		return nil
	}
	fb := &feedBatch{}
	if listening {
		for _, ev := range items {
			if ev.Change != StepChanged {
				fb.listItems = append(fb.listItems, ev)
			}
		}
	}
	// Each followed job's items, in order, for its subscribers.
	if followed != nil {
		fb.perJob = map[string][]FeedItem{}
		for _, ev := range items {
			if followed[ev.Job.ID] {
				fb.perJob[ev.Job.ID] = append(fb.perJob[ev.Job.ID], ev)
			}
		}
	}
	return fb
}

// send delivers a committed batch's items; it never blocks.
func (f *jobFeed) send(fb *feedBatch) {
	if fb == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(fb.listItems) > 0 {
		for s := range f.subs {
			f.sendTo(s, fb.listItems)
		}
	}
	for job, evs := range fb.perJob {
		for s := range f.byJob[job] {
			f.sendTo(s, evs)
		}
	}
}

// sendTo gives s the items, or drops it if its buffer is full rather than
// wait for it; f.mu is held.
func (f *jobFeed) sendTo(s *FeedSubscription, items []FeedItem) {
	for _, ev := range items {
		select {
		case s.ch <- ev:
		default:
			f.drop(s, true)
			return
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
