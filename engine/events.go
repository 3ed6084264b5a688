package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Job events tell live lists (the UI's dashboard, jobs and task pages)
// that a job was created or changed status, once the change is committed.
// The loop publishes them without ever waiting: each subscriber has a
// bounded buffer, and one that falls behind is dropped and told so (it
// reloads its list and subscribes again).

//
// A subscriber may follow one job (SubscribeJob): it then receives that
// job's events and its step events (a step record changed status,
// attempt or retry time), and no other job's. Step events are made only
// for jobs someone follows, so a big for_each job costs nothing more
// while no page shows it, and list subscribers never see them.

// Job changes an event reports.
const (
	JobCreated       = "created"
	JobStatusChanged = "status"
	StepChanged      = "step" // to subscribers of the step's job only
)

// JobEvent is one committed change of a job: the job's list fields, never
// its input or output. A StepChanged event's Job holds only the job's ID,
// Workspace, TaskName and AccessPath, and Step says what the step now is.
type JobEvent struct {
	Change string     // JobCreated, JobStatusChanged or StepChanged
	Job    Job        // a copy; Input and Output are nil
	Step   *StepEvent // StepChanged only
}

// StepEvent is a step record's list fields: no input, output or error
// text (a page that wants them fetches the job).
type StepEvent struct {
	Name        string
	Status      string
	WorkerID    *string
	StartedAt   *time.Time
	CompletedAt *time.Time
	Attempt     int // 1-based
	RetryAt     *time.Time
}

// stepSig is what a step event reports a change of.
type stepSig struct {
	status  string
	attempt int
	retryAt time.Time
}

// DefaultJobEventBuffer is how many events a subscriber may have waiting.
const DefaultJobEventBuffer = 256

// JobSubscription receives job events until Close, or until it fell behind.
type JobSubscription struct {
	job  string // the job followed; "" for every job's job events
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
	subs   map[*JobSubscription]struct{}            // of every job's job events
	byJob  map[string]map[*JobSubscription]struct{} // following one job
	closed bool                                     // the engine stopped: subscriptions end at once
	// last is the status last published of each live job; only the loop
	// reads and writes it.
	last map[string]string
	// steps is what was last published of each step of the followed
	// jobs; only the loop reads and writes it.
	steps map[string]map[string]stepSig
}

func newJobFeed() *jobFeed {
	return &jobFeed{
		subs:  map[*JobSubscription]struct{}{},
		byJob: map[string]map[*JobSubscription]struct{}{},
		last:  map[string]string{},
		steps: map[string]map[string]stepSig{},
	}
}

// SubscribeJobs starts receiving job events, buffer of them at most
// waiting (0 = DefaultJobEventBuffer). Close the subscription when done.
// Once the engine has stopped, Events is closed (and not Lost).
func (e *Engine) SubscribeJobs(buffer int) *JobSubscription {
	return e.subscribe("", buffer)
}

// SubscribeJob is SubscribeJobs for one job: its job events and its step
// events (StepChanged), in commit order; of one commit, the jobs created
// come first and the jobs' status changes last. The first change of each step after subscribing is
// reported even if its status is the one it had.
func (e *Engine) SubscribeJob(jobID string, buffer int) *JobSubscription {
	return e.subscribe(jobID, buffer)
}

// subscribe registers the subscription in the loop, and returns once the
// batch it joined is durable: every batch the loop had taken before it is
// durable too, so what the subscriber reads from the store next is at
// least as new as the first event it can miss (events are taken from a
// batch when it goes to the store, see collect).
func (e *Engine) subscribe(jobID string, buffer int) *JobSubscription {
	v, err := e.do(context.Background(), func(*batch) (any, error) { return e.feed.subscribe(jobID, buffer), nil })
	if err != nil {
		// The engine stopped: the subscription ends at once.
		return e.feed.subscribe(jobID, buffer)
	}
	return v.(*JobSubscription)
}

func (f *jobFeed) subscribe(job string, buffer int) *JobSubscription {
	if buffer <= 0 {
		buffer = DefaultJobEventBuffer
	}
	s := &JobSubscription{job: job, ch: make(chan JobEvent, buffer), feed: f}
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
		f.byJob[job] = map[*JobSubscription]struct{}{}
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

func (f *jobFeed) remove(s *JobSubscription, lost bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop(s, lost)
}

// drop ends s, if it is still subscribed; f.mu is held.
func (f *jobFeed) drop(s *JobSubscription, lost bool) {
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

// feedBatch is one batch's events, taken when the batch goes to the store
// (its records change again as the loop goes on) and sent once durable.
type feedBatch struct {
	jobEvents []JobEvent            // for every job's subscribers
	perJob    map[string][]JobEvent // for the subscribers of each followed job
}

// collect takes the events of a batch: the jobs that were created or
// changed status, and the changed steps of followed jobs; jobOf is a live
// job by ID (nil if unknown). Called by the loop only, in commit order;
// nil when there is nothing to send.
func (f *jobFeed) collect(b *batch, jobOf func(id string) *Job) *feedBatch {
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
	var events, changed []JobEvent
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
		if !listening && !followed[j.ID] {
			continue
		}
		if change == JobCreated {
			events = append(events, JobEvent{Change: change, Job: listCopy(j)})
		} else {
			changed = append(changed, JobEvent{Change: change, Job: listCopy(j)})
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
			events = append(events, JobEvent{Change: StepChanged, Job: ref, Step: &StepEvent{
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
	events = append(events, changed...)
	if len(events) == 0 {
		return nil
	}
	fb := &feedBatch{}
	if listening {
		for _, ev := range events {
			if ev.Change != StepChanged {
				fb.jobEvents = append(fb.jobEvents, ev)
			}
		}
	}
	// Each followed job's events, in order, for its subscribers.
	if followed != nil {
		fb.perJob = map[string][]JobEvent{}
		for _, ev := range events {
			if followed[ev.Job.ID] {
				fb.perJob[ev.Job.ID] = append(fb.perJob[ev.Job.ID], ev)
			}
		}
	}
	return fb
}

// send delivers a committed batch's events; it never blocks.
func (f *jobFeed) send(fb *feedBatch) {
	if fb == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(fb.jobEvents) > 0 {
		for s := range f.subs {
			f.sendTo(s, fb.jobEvents)
		}
	}
	for job, evs := range fb.perJob {
		for s := range f.byJob[job] {
			f.sendTo(s, evs)
		}
	}
}

// sendTo gives s the events, or drops it if its buffer is full rather than
// wait for it; f.mu is held.
func (f *jobFeed) sendTo(s *JobSubscription, events []JobEvent) {
	for _, ev := range events {
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
