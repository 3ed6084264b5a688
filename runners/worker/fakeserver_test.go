package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// fakeServer is an in-memory Server for the worker loop's tests. A test
// double rather than the engine: the real in-process transport onto the
// engine is written (and tested) with the engine, the HTTP transport is
// tested in client_test.go, and a double lets these tests inject what is
// hard to provoke for real (a server forgetting the worker, network errors,
// refused reports) deterministically.
type fakeServer struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every state change

	nextID    int
	known     map[string]bool
	queue     []*Assignment
	cancelled map[string]bool
	// cancelOnlyByPush hides cancellation from Cancelled, so only the log
	// push answer can carry it.
	cancelOnlyByPush bool
	wsDir            string

	// Failure injection: each returns the error for a call, or nil.
	registerErr func(n int) error
	claimErr    func(n int) error
	completeErr func(n int) error
	startErr    func(n int) error
	// down makes log pushes and completions fail as if the server were
	// unreachable.
	down bool
	// conflicts lists "job/step" keys whose reports are refused (409).
	conflicts map[string]bool

	registers, heartbeats, claims, completes, starts int
	events                                           []string // "start j/s", "logs j/s", "complete j/s"
	results                                          map[string]Result
	logs                                             map[string][]LogLine // by "job/step"
	logsAtComplete                                   map[string]int
	running, maxRunning                              int
	reported                                         [][]StepRef // each heartbeat's running list
}

var errServerDown = errors.New("connect: connection refused")

func newFakeServer(wsDir string) *fakeServer {
	return &fakeServer{
		changed: make(chan struct{}), known: map[string]bool{}, cancelled: map[string]bool{},
		results: map[string]Result{}, conflicts: map[string]bool{}, logs: map[string][]LogLine{}, logsAtComplete: map[string]int{},
		wsDir: wsDir,
	}
}

// notify wakes long-polls; call with mu held.
func (f *fakeServer) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// waitChange waits for a state change, ctx's end or d; call with mu held.
func (f *fakeServer) waitChange(ctx context.Context, d time.Duration) bool {
	ch := f.changed
	f.mu.Unlock()
	defer f.mu.Lock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (f *fakeServer) enqueue(a *Assignment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, a)
	f.notify()
}

func (f *fakeServer) cancel(jobID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled[jobID] = true
	f.notify()
}

// forget drops every worker, as a server that lost its state would.
func (f *fakeServer) forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known = map[string]bool{}
}

func (f *fakeServer) with(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *fakeServer) result(key string) (Result, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.results[key]
	return r, ok
}

func (f *fakeServer) Register(ctx context.Context, name string, tags []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registers++
	if f.registerErr != nil {
		if err := f.registerErr(f.registers); err != nil {
			return "", err
		}
	}
	f.nextID++
	id := fmt.Sprintf("w%d", f.nextID)
	f.known[id] = true
	return id, nil
}

func (f *fakeServer) Heartbeat(ctx context.Context, workerID string, running []StepRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats++
	f.reported = append(f.reported, running)
	if !f.known[workerID] {
		return ErrUnknownWorker
	}
	return nil
}

func (f *fakeServer) Claim(ctx context.Context, workerID string, tags []string) (*Assignment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims++
	if f.claimErr != nil {
		if err := f.claimErr(f.claims); err != nil {
			return nil, err
		}
	}
	if !f.known[workerID] {
		return nil, ErrUnknownWorker
	}
	deadline := time.Now().Add(200 * time.Millisecond) // a short long-poll
	for len(f.queue) == 0 {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		f.waitChange(ctx, left)
		if !f.known[workerID] {
			return nil, ErrUnknownWorker
		}
	}
	a := f.queue[0]
	f.queue = f.queue[1:]
	return a, nil
}

func (f *fakeServer) Start(ctx context.Context, workerID, jobID, step string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.startErr != nil {
		if err := f.startErr(f.starts); err != nil {
			f.notify()
			return err
		}
	}
	f.events = append(f.events, "start "+jobID+"/"+step)
	f.running++
	f.maxRunning = max(f.maxRunning, f.running)
	f.notify()
	return nil
}

func (f *fakeServer) Complete(ctx context.Context, workerID, jobID, step string, res Result) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.completes++
	if f.down {
		return errServerDown
	}
	if f.conflicts[jobID+"/"+step] {
		return &StatusError{Op: "complete step", Status: 409, Message: "step is not running", sentinel: ErrConflict}
	}
	if f.completeErr != nil {
		if err := f.completeErr(f.completes); err != nil {
			return err
		}
	}
	key := jobID + "/" + step
	f.events = append(f.events, "complete "+key)
	res.WorkerID = workerID
	f.results[key] = res
	f.logsAtComplete[key] = len(f.logs[key])
	f.running--
	f.notify()
	return nil
}

func (f *fakeServer) PushLogs(ctx context.Context, jobID string, push LogPush) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errServerDown
	}
	if f.conflicts[jobID+"/"+push.StepName] {
		return false, &StatusError{Op: "push logs", Status: 409, Message: "step is not running", sentinel: ErrConflict}
	}
	key := jobID + "/" + push.StepName
	f.events = append(f.events, "logs "+key)
	f.logs[key] = append(f.logs[key], push.Lines...)
	f.notify()
	return f.cancelled[jobID], nil
}

func (f *fakeServer) StepToken(ctx context.Context, workerID, jobID, step string) (string, error) {
	return "step-token-" + jobID + "-" + step, nil
}

func (f *fakeServer) Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	deadline := time.Now().Add(wait)
	for f.cancelOnlyByPush || !f.cancelled[jobID] {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false, nil
		}
		f.waitChange(ctx, left)
	}
	return true, nil
}

func (f *fakeServer) Workspace(ctx context.Context, workspace, revision string) (string, error) {
	if workspace == "missing" {
		return "", errors.New("workspace not found")
	}
	return f.wsDir, nil
}
