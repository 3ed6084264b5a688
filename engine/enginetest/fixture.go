package enginetest

import (
	"context"
	"github.com/appliance-sh/appliance/audit"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// WorkspaceName is the name fixtures load their workspace under.
const WorkspaceName = "main"

// waitFor bounds every poll of the fixture; a correct engine answers in
// microseconds, so hitting it means the state never came.
const waitFor = 10 * time.Second

// Epoch is where fixture clocks start.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Fixture runs a real engine over the harness's parts and drives it like a
// worker would, so a test reads like its scenario.
type Fixture struct {
	T          testing.TB
	Engine     *engine.Engine
	Store      *MemStore
	Clock      *Clock
	Logs       *Logs
	Workspaces *Workspaces
	WS         *workflow.Workspace
	// Worker is an in-process worker with every tag the workspace uses.
	Worker     string
	WorkerTags []string
	// LastJob is the job Execute created last; RunStep works on it.
	LastJob string

	opts   Options // what each start of the engine is given
	cancel context.CancelFunc
	done   chan error
	pocket map[[2]string]*engine.Claim // claimed by Worker, not yet run
}

// Options tune a fixture.
type Options struct {
	HeartbeatTimeout time.Duration // 0 = engine default
	Store            *MemStore     // nil = a new one
	NoWorker         bool          // do not register the fixture's worker
	TemplateTime     time.Duration // 0 = engine default
	TemplateOutput   int           // 0 = engine default
	Metrics          engine.Metrics
	Agents           engine.AgentCaller // nil = agent steps fail
	AgentSlots       int                // 0 = engine default
	Linger           time.Duration      // 0 = engine default
	// RunnerTag stands in for the runners' registry (nil = TestRunnerTag).
	RunnerTag func(runner string) string
	// Queues are the server config's named queues and their limits.
	Queues map[string]int
	// Audit is the queue of entries that ride the next commit (nil: none).
	Audit *audit.Queue
}

// TestRunnerTag is the harness's stand-in for the runners' registry
// (runners.CapabilityTag, which the engine must not import): the docker
// runner needs the docker tag, the pod runner the kubernetes tag.
func TestRunnerTag(runner string) string {
	return map[string]string{"docker": "docker", "pod": "kubernetes"}[runner]
}

// LoadWorkspace writes yaml as the workspace's only workflow file and loads it.
func LoadWorkspace(t testing.TB, yaml string) *workflow.Workspace {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, workspace.WorkflowDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, workspace.WorkflowDir, "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Load(WorkspaceName, dir, map[string]string{})
	if err != nil {
		t.Fatalf("load workspace: %v", err)
	}
	return ws
}

// New loads yaml and starts an engine over it with a fake clock.
func New(t testing.TB, yaml string) *Fixture {
	return NewWith(t, LoadWorkspace(t, yaml), Options{})
}

// NewWith starts an engine over a loaded workspace.
func NewWith(t testing.TB, ws *workflow.Workspace, opts Options) *Fixture {
	t.Helper()
	store := opts.Store
	if store == nil {
		store = NewMemStore()
	}
	f := &Fixture{
		T:          t,
		Store:      store,
		Clock:      NewClock(Epoch),
		Logs:       NewLogs(),
		Workspaces: NewWorkspaces(ws),
		WS:         ws,
		WorkerTags: workspaceTags(ws),
		opts:       opts,
	}
	f.start()
	t.Cleanup(f.Stop)
	return f
}

func (f *Fixture) runnerTag() func(string) string {
	if f.opts.RunnerTag != nil {
		return f.opts.RunnerTag
	}
	return TestRunnerTag
}

// start runs a fresh engine over the fixture's store, clock and logs, and
// registers the fixture's in-process worker.
func (f *Fixture) start() {
	f.T.Helper()
	e, err := engine.New(engine.Config{
		Store:            f.Store,
		Workspaces:       f.Workspaces,
		Logs:             f.Logs,
		Clock:            f.Clock,
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatTimeout: f.opts.HeartbeatTimeout,
		TemplateTime:     f.opts.TemplateTime,
		TemplateOutput:   f.opts.TemplateOutput,
		Metrics:          f.opts.Metrics,
		Agents:           f.opts.Agents,
		AgentSlots:       f.opts.AgentSlots,
		Linger:           f.opts.Linger,
		RunnerTag:        f.runnerTag(),
		Queues:           f.opts.Queues,
		Audit:            f.opts.Audit,
	})
	if err != nil {
		f.T.Fatalf("new engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Engine, f.cancel, f.done = e, cancel, make(chan error, 1)
	go func() { f.done <- e.Run(ctx) }()
	if err := e.Ready(ctx); err != nil {
		f.T.Fatalf("engine not ready: %v", err)
	}
	f.pocket = map[[2]string]*engine.Claim{}
	if !f.opts.NoWorker {
		f.Worker = f.Register("fixture", f.WorkerTags, true)
	}
}

// Stop stops the engine and waits for Run to return.
func (f *Fixture) Stop() {
	if f.cancel == nil {
		return
	}
	f.cancel()
	if err := <-f.done; err != nil {
		f.T.Errorf("engine run: %v", err)
	}
	f.cancel = nil
}

// Restart stops the engine and starts a new one over the same store, as a
// server restart would.
func (f *Fixture) Restart() {
	f.T.Helper()
	f.Stop()
	f.start()
}

func (f *Fixture) ctx() context.Context { return context.Background() }

// Settle waits until every template render the engine handed off has come
// back and been applied, so that what a test reads next is deterministic.
func (f *Fixture) Settle() {
	f.T.Helper()
	ctx, cancel := context.WithTimeout(f.ctx(), waitFor)
	defer cancel()
	if err := f.Engine.Idle(ctx); err != nil {
		f.T.Fatalf("engine never settled: %v", err)
	}
}

// Execute creates a job of task and returns its id.
func (f *Fixture) Execute(task string, input map[string]any) string {
	f.T.Helper()
	j, err := f.Engine.CreateJob(f.ctx(), engine.CreateJob{Workspace: WorkspaceName, Task: task, Input: input})
	if err != nil {
		f.T.Fatalf("execute %s: %v", task, err)
	}
	f.LastJob = j.ID
	f.Settle()
	return j.ID
}

// Register registers a worker and returns its id.
func (f *Fixture) Register(name string, tags []string, inProcess bool) string {
	f.T.Helper()
	id, err := f.Engine.RegisterWorker(f.ctx(), name, tags, inProcess, "")
	if err != nil {
		f.T.Fatalf("register worker %s: %v", name, err)
	}
	return id
}

// ClaimStep claims steps as the fixture's worker until it holds the named
// step of the last job; other claimed steps are kept for later RunStep calls.
func (f *Fixture) ClaimStep(step string) *engine.Claim {
	f.T.Helper()
	return f.ClaimJobStep(f.LastJob, step)
}

// ClaimJobStep is ClaimStep for a given job.
func (f *Fixture) ClaimJobStep(jobID, step string) *engine.Claim {
	f.T.Helper()
	key := [2]string{jobID, step}
	f.Settle()
	for {
		if c, ok := f.pocket[key]; ok {
			delete(f.pocket, key)
			return c
		}
		c, err := f.Engine.Claim(f.ctx(), f.Worker, 0)
		if err != nil {
			f.T.Fatalf("claim %s: %v", step, err)
		}
		if c == nil {
			f.T.Fatalf("claim %s: no ready step (it is %s)", step, f.Step(jobID, step).Status)
		}
		f.pocket[[2]string{c.JobID, c.StepName}] = c
	}
}

// RunStep claims, starts and completes a step of the last job as the
// fixture's worker.
func (f *Fixture) RunStep(step string, res engine.StepResult) *engine.Claim {
	f.T.Helper()
	return f.RunJobStep(f.LastJob, step, res)
}

// RunJobStep is RunStep for a given job.
func (f *Fixture) RunJobStep(jobID, step string, res engine.StepResult) *engine.Claim {
	f.T.Helper()
	c := f.ClaimJobStep(jobID, step)
	if err := f.Engine.StartStep(f.ctx(), f.Worker, jobID, step); err != nil {
		f.T.Fatalf("start %s: %v", step, err)
	}
	if err := f.Engine.CompleteStep(f.ctx(), f.Worker, jobID, step, res); err != nil {
		f.T.Fatalf("complete %s: %v", step, err)
	}
	f.Settle()
	return c
}

// Job returns the committed job.
func (f *Fixture) Job(id string) *engine.Job {
	f.T.Helper()
	f.Settle()
	j, _, err := f.Engine.Job(f.ctx(), id)
	if err != nil {
		f.T.Fatalf("job %s: %v", id, err)
	}
	return j
}

// Steps returns the committed steps of a job by name.
func (f *Fixture) Steps(id string) map[string]*engine.Step {
	f.T.Helper()
	f.Settle()
	_, steps, err := f.Engine.Job(f.ctx(), id)
	if err != nil {
		f.T.Fatalf("job %s: %v", id, err)
	}
	m := map[string]*engine.Step{}
	for _, s := range steps {
		m[s.Name] = s
	}
	return m
}

// Step returns one committed step; a missing step fails the test.
func (f *Fixture) Step(jobID, name string) *engine.Step {
	f.T.Helper()
	s, ok := f.Steps(jobID)[name]
	if !ok {
		f.T.Fatalf("job %s has no step %q", jobID, name)
	}
	return s
}

// StepStatuses maps each step of a job to its status.
func (f *Fixture) StepStatuses(jobID string) map[string]string {
	f.T.Helper()
	m := map[string]string{}
	for name, s := range f.Steps(jobID) {
		m[name] = s.Status
	}
	return m
}

// WaitStatus polls until the job has status, failing the test at the deadline.
func (f *Fixture) WaitStatus(jobID, status string) *engine.Job {
	f.T.Helper()
	var j *engine.Job
	f.Eventually(func() bool { j = f.Job(jobID); return j.Status == status },
		func() string { return "job " + jobID + " is " + j.Status + ", want " + status })
	return j
}

// WaitStep polls until a step has status.
func (f *Fixture) WaitStep(jobID, step, status string) *engine.Step {
	f.T.Helper()
	var s *engine.Step
	f.Eventually(func() bool { s = f.Steps(jobID)[step]; return s != nil && s.Status == status },
		func() string {
			if s == nil {
				return "step " + step + " does not exist, want " + status
			}
			return "step " + step + " is " + s.Status + ", want " + status
		})
	return s
}

// Eventually polls cond until it holds, failing with msg() at the deadline.
func (f *Fixture) Eventually(cond func() bool, msg func() string) {
	f.T.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			f.T.Fatalf("timed out: %s", msg())
		}
		time.Sleep(time.Millisecond)
	}
}

// WaitTimers polls until at least n clock timers are pending, so that an
// Advance is sure to reach the timer it means to fire.
func (f *Fixture) WaitTimers(n int) {
	f.T.Helper()
	f.Eventually(func() bool { return f.Clock.Pending() >= n },
		func() string { return "timers never armed" })
}

// Ok is a successful step result with output.
func Ok(output map[string]any) engine.StepResult { return engine.StepResult{Output: output} }

// Exit is a failed step result with an exit code and no error text.
func Exit(code int) engine.StepResult { return engine.StepResult{ExitCode: code} }

// Fail is a failed step result with an error.
func Fail(code int, msg string) engine.StepResult {
	return engine.StepResult{ExitCode: code, Error: &msg}
}

// workspaceTags is every tag the workspace's steps may require.
func workspaceTags(ws *workflow.Workspace) []string {
	set := map[string]bool{"docker": true, "kubernetes": true}
	add := func(a *workflow.Action) {
		if a != nil {
			for _, t := range a.Tags {
				set[t] = true
			}
		}
	}
	for _, a := range ws.Actions {
		add(a)
	}
	for _, t := range ws.Tasks {
		for _, fs := range t.Flow {
			add(fs.Inline)
		}
	}
	tags := make([]string, 0, len(set))
	for t := range set {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	return tags
}

// RunEnded waits for Run to return by itself (on an error it cannot get
// past) and returns its error; the engine is then stopped.
func (f *Fixture) RunEnded() error {
	f.T.Helper()
	select {
	case err := <-f.done:
		f.cancel()
		f.cancel = nil
		return err
	case <-time.After(20 * time.Second):
		f.T.Fatal("the engine is still running")
		return nil
	}
}
