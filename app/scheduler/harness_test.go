package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// waitFor bounds every poll: the scheduler reacts in microseconds, so
// reaching it means the awaited state never came.
const waitFor = 10 * time.Second

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what())
		}
		time.Sleep(time.Millisecond)
	}
}

// fakeClock moves only when Set is called; timers due by then deliver.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     int
	pending []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	seq  int
	when time.Time
	ch   chan time.Time
}

func newClock(now time.Time) *fakeClock { return &fakeClock{now: now} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) scheduler.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, seq: c.seq, when: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.pending = append(c.pending, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	i := slices.Index(t.c.pending, t)
	if i < 0 {
		return false
	}
	t.c.pending = slices.Delete(t.c.pending, i, i+1)
	return true
}

// Set moves the clock to now and delivers every timer due by then.
func (c *fakeClock) Set(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
	c.pending = slices.DeleteFunc(c.pending, func(t *fakeTimer) bool {
		if t.when.After(now) {
			return false
		}
		t.ch <- now
		return true
	})
}

// created counts the timers ever made.
func (c *fakeClock) created() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// armed waits for a pending timer made after timer number seq, and returns
// when it is due and its number: the scheduler has gone back to sleep.
func (c *fakeClock) armed(t *testing.T, seq int) (time.Time, int) {
	t.Helper()
	var got *fakeTimer
	eventually(t, func() string { return fmt.Sprintf("no timer armed after timer %d", seq) }, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.pending {
			if p.seq > seq {
				got = p
				return true
			}
		}
		return false
	})
	if n := c.pendingCount(); n != 1 {
		t.Fatalf("%d timers pending, want the scheduler's one", n)
	}
	return got.when, got.seq
}

func (c *fakeClock) pendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// fakeWorkspaces holds workspace revisions that a test swaps as a hot
// reload would.
type fakeWorkspaces struct {
	mu      sync.Mutex
	list    []workspace.Status
	changed chan struct{}
	lists   int
}

func newWorkspaces(wss ...*workflow.Workspace) *fakeWorkspaces {
	w := &fakeWorkspaces{changed: make(chan struct{})}
	w.set(wss...)
	return w
}

func (w *fakeWorkspaces) set(wss ...*workflow.Workspace) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = nil
	for _, ws := range wss {
		w.list = append(w.list, workspace.Status{Name: ws.Name, Workspace: ws})
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *fakeWorkspaces) List() []workspace.Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lists++
	return slices.Clone(w.list)
}

func (w *fakeWorkspaces) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *fakeWorkspaces) listed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lists
}

// call is one job a trigger asked for, and the clock's time then.
type call struct {
	req         engine.CreateJob
	concurrency string
	at          time.Time
}

// fakeJobs records the jobs asked for, and their fires in state as the
// engine's commit would; fail, when set, decides per call (numbered from 1)
// whether it fails (and records nothing).
type fakeJobs struct {
	mu    sync.Mutex
	clock *fakeClock
	state *memState
	calls []call
	fail  func(n int) error
}

func (j *fakeJobs) CreateTriggered(_ context.Context, req engine.CreateJob, concurrency string) (*engine.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.calls = append(j.calls, call{req: req, concurrency: concurrency, at: j.clock.Now()})
	if j.fail != nil {
		if err := j.fail(len(j.calls)); err != nil {
			return nil, err
		}
	}
	if f := req.Fire; f != nil && j.state != nil {
		if err := j.state.SetLastFire(f.Workspace, f.Trigger, f.At); err != nil {
			return nil, err
		}
	}
	return &engine.Job{ID: fmt.Sprintf("job-%d", len(j.calls)), Status: engine.JobPending}, nil
}

func (j *fakeJobs) made() []call {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.calls)
}

// wait polls until n jobs were asked for and returns them.
func (j *fakeJobs) wait(t *testing.T, n int) []call {
	t.Helper()
	eventually(t, func() string { return fmt.Sprintf("%d jobs asked for, want %d", len(j.made()), n) },
		func() bool { return len(j.made()) >= n })
	return j.made()
}

// memState is an in-memory State that keeps every write.
type memState struct {
	mu     sync.Mutex
	last   map[string]time.Time
	writes []string // "ws/trigger@time"
}

func newState() *memState { return &memState{last: map[string]time.Time{}} }

func (s *memState) LastFire(ws, trigger string) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.last[ws+"/"+trigger]
	return t, ok, nil
}

func (s *memState) SetLastFire(ws, trigger string, t time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[ws+"/"+trigger] = t
	s.writes = append(s.writes, ws+"/"+trigger+"@"+t.UTC().Format(time.RFC3339))
	return nil
}

func (s *memState) get(source string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[source]
}

func (s *memState) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// loadWS writes yaml as a workspace's only workflow file and loads it.
func loadWS(t *testing.T, name, yaml string) *workflow.Workspace {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, workspace.WorkflowDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, workspace.WorkflowDir, "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Load(name, dir, map[string]string{})
	if err != nil {
		t.Fatalf("load workspace %s: %v", name, err)
	}
	return ws
}

// start runs a scheduler until the test ends (or stop is called).
func start(t *testing.T, cfg scheduler.Config) (stop func()) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- scheduler.New(cfg).Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("scheduler run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
