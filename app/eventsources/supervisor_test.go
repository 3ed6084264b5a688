package eventsources

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// fakeClock hands out timers that fire only when the test says so, and
// records each timer's duration: the restart delays.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	d  time.Duration
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }
func (t *fakeTimer) Stop() bool          { return true }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) NewTimer(d time.Duration) scheduler.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{d: d, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

// fire advances the clock by the last timer's delay and fires it; it
// returns the delay.
func (c *fakeClock) fire() time.Duration {
	c.mu.Lock()
	t := c.timers[len(c.timers)-1]
	c.now = c.now.Add(t.d)
	c.mu.Unlock()
	t.ch <- c.now
	return t.d
}

func (c *fakeClock) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fakeJobs is the engine as the supervisor sees it: jobs end when the test
// ends them.
type fakeJobs struct {
	mu   sync.Mutex
	jobs []*fakeJob
	live []*engine.Job // returned by LiveFromSource
}

type fakeJob struct {
	job  engine.Job
	done chan struct{}
}

func (f *fakeJobs) CreateTriggered(_ context.Context, req engine.CreateJob, _ string) (*engine.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := &fakeJob{job: engine.Job{ID: fmt.Sprintf("job-%d", len(f.jobs)+1), TaskName: req.Task, Status: engine.JobRunning,
		SourceType: req.SourceType, SourceID: req.SourceID}, done: make(chan struct{})}
	f.jobs = append(f.jobs, j)
	c := j.job
	return &c, nil
}

func (f *fakeJobs) get(id string) *fakeJob {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.job.ID == id {
			return j
		}
	}
	return nil
}

func (f *fakeJobs) end(id, status string) {
	j := f.get(id)
	f.mu.Lock()
	j.job.Status = status
	f.mu.Unlock()
	close(j.done)
}

func (f *fakeJobs) CancelJob(_ context.Context, id string) error {
	if j := f.get(id); j != nil {
		f.end(id, engine.JobCancelled)
		return nil
	}
	return engine.ErrNotFound
}

func (f *fakeJobs) JobDone(_ context.Context, id string) (<-chan struct{}, error) {
	if j := f.get(id); j != nil {
		return j.done, nil
	}
	return nil, engine.ErrNotFound
}

func (f *fakeJobs) Job(_ context.Context, id string) (*engine.Job, []*engine.Step, error) {
	j := f.get(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	c := j.job
	return &c, nil, nil
}

func (f *fakeJobs) LiveFromSource(context.Context, string, string) ([]*engine.Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live, nil
}

func (f *fakeJobs) n() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs)
}

// fakeWorkspaces serves one workspace "ws" whose triggers the test sets.
type fakeWorkspaces struct {
	mu      sync.Mutex
	ws      *workflow.Workspace
	changed chan struct{}
	// hold, when set, holds List until it is closed.
	hold chan struct{}
}

func (w *fakeWorkspaces) List() []workspace.Status {
	if w.hold != nil {
		<-w.hold
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return []workspace.Status{{Name: "ws", Workspace: w.ws}}
}

func (w *fakeWorkspaces) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *fakeWorkspaces) set(triggers map[string]*workflow.Trigger) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = &workflow.Workspace{Name: "ws", Triggers: triggers}
	close(w.changed)
	w.changed = make(chan struct{})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func source(policy string, backoff int) *workflow.Trigger {
	return &workflow.Trigger{Type: workflow.TriggerEventSource, Task: "consume", TargetTask: "handle", Enabled: true,
		RestartPolicy: policy, BackoffSecs: backoff}
}

func start(t *testing.T, jobs *fakeJobs, triggers map[string]*workflow.Trigger) (*Supervisor, *fakeClock, *fakeWorkspaces) {
	t.Helper()
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ws := &fakeWorkspaces{ws: &workflow.Workspace{Name: "ws", Triggers: triggers}, changed: make(chan struct{})}
	s := New(Config{Workspaces: ws, Jobs: jobs, Clock: clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, clock, ws
}

// A supervisor says it runs before it has read the workspaces, so an
// enabled event source it has not taken up yet shows as starting (the
// API's view) rather than stopped: a stopped consumer without a job reads
// as one that ended before it began.
func TestATriggerNotTakenUpYetIsStarting(t *testing.T) {
	jobs := &fakeJobs{}
	ws := &fakeWorkspaces{ws: &workflow.Workspace{Name: "ws", Triggers: map[string]*workflow.Trigger{"src": source(RestartNever, 1)}},
		changed: make(chan struct{}), hold: make(chan struct{})}
	s := New(Config{Workspaces: ws, Jobs: jobs, Clock: &fakeClock{now: time.Now()}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if s.Running() {
		t.Fatal("running before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, "the supervisor to run", s.Running)
	if st, ok := s.Status("ws", "src"); ok {
		t.Fatalf("before the supervisor read the workspaces: %+v, want unknown (starting, for the API)", st)
	}
	close(ws.hold)
	eventually(t, "the consumer", func() bool { st, _ := s.Status("ws", "src"); return st.ConsumerJobID == "job-1" })
}

func TestRestartBackoffDoublesUpToFiveMinutesAndResetsAfterAMinuteOfRunning(t *testing.T) {
	jobs := &fakeJobs{}
	s, clock, _ := start(t, jobs, map[string]*workflow.Trigger{"src": source(RestartAlways, 10)})
	var delays []time.Duration
	for i := 1; i <= 8; i++ {
		eventually(t, fmt.Sprintf("consumer %d", i), func() bool { return jobs.n() == i })
		id := fmt.Sprintf("job-%d", i)
		if st, _ := s.Status("ws", "src"); st.ConsumerJobID != id || st.Restarts != i-1 {
			eventually(t, "status of "+id, func() bool {
				st, _ := s.Status("ws", "src")
				return st.ConsumerJobID == id && st.State == engine.ConsumerRunning && st.Restarts == i-1
			})
		}
		if i == 8 {
			clock.advance(ResetAfter) // ran a minute: the delay starts over
		}
		jobs.end(id, engine.JobCompleted)
		eventually(t, "backoff", func() bool { return clock.count() == i })
		if st, _ := s.Status("ws", "src"); st.State != engine.ConsumerBackoff {
			t.Fatalf("after consumer %d ended, state %q, want backoff", i, st.State)
		}
		delays = append(delays, clock.fire())
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second,
		5 * time.Minute, 5 * time.Minute, 10 * time.Second}
	if fmt.Sprint(delays) != fmt.Sprint(want) {
		t.Fatalf("restart delays %v, want %v", delays, want)
	}
}

func TestRestartPolicyDecidesOnTheConsumersStatus(t *testing.T) {
	for _, tc := range []struct {
		policy, status string
		restart        bool
	}{
		{RestartAlways, engine.JobCompleted, true},
		{RestartAlways, engine.JobFailed, true},
		{"", engine.JobCompleted, true}, // always is the default
		{RestartOnFailure, engine.JobFailed, true},
		{RestartOnFailure, engine.JobCompleted, false},
		{RestartNever, engine.JobFailed, false},
	} {
		t.Run(tc.policy+"_"+tc.status, func(t *testing.T) {
			jobs := &fakeJobs{}
			s, clock, _ := start(t, jobs, map[string]*workflow.Trigger{"src": source(tc.policy, 1)})
			eventually(t, "consumer", func() bool { return jobs.n() == 1 })
			jobs.end("job-1", tc.status)
			want := engine.ConsumerStopped
			if tc.restart {
				want = engine.ConsumerBackoff
			}
			eventually(t, "state "+want, func() bool { st, _ := s.Status("ws", "src"); return st.State == want })
			if tc.restart {
				clock.fire()
				eventually(t, "restart", func() bool {
					st, _ := s.Status("ws", "src")
					return st.Restarts == 1 && st.State == engine.ConsumerRunning
				})
			} else if clock.count() != 0 || jobs.n() != 1 {
				t.Fatalf("%d timers and %d jobs, want no restart", clock.count(), jobs.n())
			}
		})
	}
}

func TestSupervisorAdoptsALiveConsumerAndReplacesItWhenTheTriggerChanges(t *testing.T) {
	src := "ws/src"
	jobs := &fakeJobs{}
	// A consumer (and a target job) still live from before a restart.
	old, _ := jobs.CreateTriggered(context.Background(), engine.CreateJob{Task: "consume", SourceType: engine.SourceTrigger, SourceID: &src}, "")
	target := &engine.Job{ID: "target", TaskName: "handle"}
	jobs.live = []*engine.Job{old, target}
	s, _, ws := start(t, jobs, map[string]*workflow.Trigger{"src": source(RestartAlways, 1)})
	eventually(t, "adoption", func() bool { st, _ := s.Status("ws", "src"); return st.ConsumerJobID == old.ID })
	if jobs.n() != 1 {
		t.Fatalf("%d jobs, want the adopted consumer only", jobs.n())
	}
	jobs.mu.Lock()
	jobs.live = nil
	jobs.mu.Unlock()

	changed := source(RestartAlways, 2)
	ws.set(map[string]*workflow.Trigger{"src": changed})
	eventually(t, "a new consumer", func() bool { st, _ := s.Status("ws", "src"); return st.ConsumerJobID == "job-2" })
	if j, _, _ := jobs.Job(context.Background(), old.ID); j.Status != engine.JobCancelled {
		t.Fatalf("replaced consumer %s, want cancelled", j.Status)
	}
	disabled := source(RestartAlways, 2)
	disabled.Enabled = false
	ws.set(map[string]*workflow.Trigger{"src": disabled})
	eventually(t, "stopped", func() bool { st, _ := s.Status("ws", "src"); return st.State == engine.ConsumerStopped })
	if j, _, _ := jobs.Job(context.Background(), "job-2"); j.Status != engine.JobCancelled {
		t.Fatalf("consumer of a disabled trigger %s, want cancelled", j.Status)
	}
	ws.set(map[string]*workflow.Trigger{})
	eventually(t, "forgotten", func() bool { _, ok := s.Status("ws", "src"); return !ok })
}
