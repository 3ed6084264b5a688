// Package engine orchestrates jobs: one goroutine owns every job, step and
// worker state change, persists each decision (group-committed, the next
// batch applied while one is written) before it answers, and hands ready
// steps to workers through long-poll claims answered from memory.
// It knows no HTTP, database or worker's machine: it must not import
// net/http, echo, bbolt, store, api, app, runners or accounts.
package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// DefaultHeartbeatTimeout is three heartbeat intervals of about 30 s.
const DefaultHeartbeatTimeout = 90 * time.Second

// Config wires an Engine.
type Config struct {
	Store      Store
	Workspaces Workspaces
	Logs       LogSink      // nil = server log lines are dropped
	Clock      Clock        // nil = the real clock
	Logger     *slog.Logger // nil = slog.Default()
	// Audit holds the audit entries that record no change of their own
	// (denied requests, failed sign-ins): each commit takes what waits
	// there (see auditwake.go). Nil: none.
	Audit *audit.Queue
	// HeartbeatTimeout is how long a remote worker may stay silent before it
	// is inactive and its running steps fail (3 heartbeat intervals).
	HeartbeatTimeout time.Duration // 0 = DefaultHeartbeatTimeout
	// TemplateTime and TemplateOutput bound each template render (the
	// server config's limits.template_time and limits.template_output).
	TemplateTime   time.Duration // 0 = DefaultTemplateTime
	TemplateOutput int           // 0 = DefaultTemplateOutput
	// RenderSlots is how many renders may run at once, abandoned ones
	// included (see defaultRenderSlots).
	RenderSlots int // 0 = four per CPU, at least 16
	// Metrics observes the loop's decisions (nil = none).
	Metrics Metrics
	// Agents calls the language models of agent steps (nil = agent steps
	// fail: no provider is configured).
	Agents AgentCaller
	// AgentSlots is how many agent calls may be in flight at once.
	AgentSlots int // 0 = DefaultAgentSlots
	// Linger is how long a batch nobody waits on may wait for more
	// before it is written, while steps run (see DefaultLinger).
	Linger time.Duration // 0 = DefaultLinger
	// RunnerTag is the capability tag a worker needs to run steps of a
	// runner ("local", "docker", "pod"), "" for none: the runners'
	// registry, injected by app (runners.CapabilityTag). nil = no runner
	// needs a tag beyond the action's own.
	RunnerTag func(runner string) string
	// Queues are the server config's named queues and their limits
	// (`queues: {NAME: {limit: N}}`), which tasks join with `queue: NAME`.
	// A job of a queue not named here waits for no slot of it.
	Queues map[string]int
}

// Engine is the orchestrator.
type Engine struct {
	cfg     Config
	clock   Clock
	log     *slog.Logger
	cmds    chan *command
	stopped chan struct{}
	started atomic.Bool
	// auditWoken: a command that makes a commit for the audit queue is
	// queued and not yet applied (see wakeAudit).
	auditWoken atomic.Bool
	loaded     bool // Load has run; set before Run starts
	commits    atomic.Int64
	// held counts the commands applied to the batch being filled, which
	// wait for the write before theirs (for tests: see QueuedCommands).
	held    atomic.Int64
	metrics Metrics
	notify  *notifier
	feed    *jobFeed        // the job feed of live lists
	holders *holderIndex    // read by log pushes outside the loop
	secrets *secretRegistry // live jobs' secrets, read by log pushes
	pool    *renderPool
	// eventHints mirrors the loop's event marks (StepRef -> stepMark) for
	// Emit to read off the loop; only a hint (see Emit).
	eventHints sync.Map
	// keys are the idempotency keys of the jobs this engine made lately
	// (see idempotency.go); owned by the Run goroutine.
	keys recentKeys

	st *state // owned by the Run goroutine
}

// New returns an engine; call Run to start it.
func New(cfg Config) (*Engine, error) {
	if cfg.Store == nil {
		return nil, errors.New("engine: a store is required")
	}
	if cfg.Workspaces == nil {
		return nil, errors.New("engine: workspaces are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.TemplateTime <= 0 {
		cfg.TemplateTime = DefaultTemplateTime
	}
	if cfg.TemplateOutput <= 0 {
		cfg.TemplateOutput = DefaultTemplateOutput
	}
	if cfg.RenderSlots <= 0 {
		cfg.RenderSlots = defaultRenderSlots()
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.AgentSlots <= 0 {
		cfg.AgentSlots = DefaultAgentSlots
	}
	metrics := cfg.Metrics
	if metrics == nil {
		metrics = noMetrics{}
	}
	e := &Engine{
		metrics: metrics,
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		cmds:    make(chan *command, maxBatch),
		stopped: make(chan struct{}),
		notify:  newNotifier(),
		feed:    newJobFeed(),
		holders: newHolderIndex(),
		secrets: newSecretRegistry(),
		pool:    newRenderPool(template.Limits{Time: cfg.TemplateTime, Output: cfg.TemplateOutput}, cfg.RenderSlots),
	}
	if cfg.Audit != nil {
		cfg.Audit.OnPush(e.wakeAudit)
	}
	return e, nil
}

// Commits returns how many group commits the engine has made (for metrics).
func (e *Engine) Commits() int64 { return e.commits.Load() }

// CreateJob creates a job (input defaults applied and validated: ErrInvalid
// naming the field) and returns it once durable. A re-run (req.Rerun) of
// an unknown job is ErrNotFound; from the failed steps of a job that is
// neither failed nor cancelled, or of a task no longer in the workspace,
// ErrConflict.
func (e *Engine) CreateJob(ctx context.Context, req CreateJob) (*Job, error) {
	j, err := e.createJob(ctx, req)
	if err != nil {
		if req.Rerun != nil {
			e.auditRefused(ctx, audit.JobRerun, "job/"+req.Rerun.JobID, err)
		} else {
			e.auditRefused(ctx, audit.JobExecute, "task/"+req.Workspace+"/"+req.Task, err)
		}
	}
	return j, err
}

func (e *Engine) createJob(ctx context.Context, req CreateJob) (*Job, error) {
	// Resolving the workspace and the input is pure: it runs here, in the
	// caller's goroutine, so the loop only links and promotes.
	if req.Fire != nil {
		return nil, fmt.Errorf("%w: only a triggered job records a trigger fire", ErrInvalid)
	}
	if req.IdempotencyKey != "" {
		if j, err := e.jobForKey(ctx, req.IdempotencyKey); j != nil || err != nil {
			return j, err
		}
	}
	var old []*Step
	if req.Rerun != nil {
		var err error
		if old, err = e.rerunRequest(ctx, &req); err != nil {
			return nil, err
		}
	}
	js, err := e.buildJobBounded(req)
	if err != nil {
		return nil, err
	}
	if req.Rerun != nil {
		markRerun(js, req.Rerun, old)
	}
	js.job.IdempotencyKey = req.IdempotencyKey
	v, err := e.do(ctx, func(b *batch) (any, error) {
		if id, ok := e.keys.get(req.IdempotencyKey, e.clock.Now()); ok {
			return id, nil
		}
		e.keys.put(req.IdempotencyKey, js.job.ID, e.clock.Now())
		action := audit.JobExecute
		if req.Rerun != nil {
			action = audit.JobRerun
		}
		b.audited(ctx, action, "job/"+js.job.ID)
		return e.insertJob(b, js), nil
	})
	if err != nil {
		return nil, err
	}
	if id, ok := v.(string); ok { // made by a request with the same key
		return e.JobRecord(ctx, id)
	}
	return v.(*Job), nil
}

// CancelJob cancels a non-terminal job (ErrConflict when terminal, ErrNotFound).
func (e *Engine) CancelJob(ctx context.Context, jobID string) error {
	_, err := e.do(ctx, func(b *batch) (any, error) {
		js, err := e.liveJob(ctx, jobID)
		if err != nil {
			return nil, err
		}
		e.stopJob(b, js, JobCancelled, "job cancelled")
		b.audited(ctx, audit.JobCancel, "job/"+jobID)
		return nil, nil
	})
	e.auditRefused(ctx, audit.JobCancel, "job/"+jobID, err)
	return err
}

// RegisterWorker records a worker and returns its id. In-process workers
// never time out. secretSHA256 is the hex SHA-256 of the secret the worker
// proves itself with ("" for none), kept with it (see WorkerCredential).
func (e *Engine) RegisterWorker(ctx context.Context, name string, tags []string, inProcess bool, secretSHA256 string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: worker name is required", ErrInvalid)
	}
	tags = normTags(tags)
	v, err := e.do(ctx, func(b *batch) (any, error) { return e.registerWorker(b, name, tags, inProcess, secretSHA256) })
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// Heartbeat marks a worker alive (ErrNotFound for an unknown worker).
//
// running, when not nil, lists every step the worker is running: a step it
// holds but does not name, claimed a third of the heartbeat timeout ago or
// more, was lost on its way to the worker and is recovered (see reconcile).
func (e *Engine) Heartbeat(ctx context.Context, workerID string, running []StepRef) error {
	_, err := e.do(ctx, func(b *batch) (any, error) { return nil, e.heartbeat(b, workerID, running) })
	return err
}

// StartStep records that the worker started a claimed step. The rules of
// CompleteStep apply.
func (e *Engine) StartStep(ctx context.Context, workerID, jobID, step string) error {
	_, err := e.do(ctx, func(b *batch) (any, error) { return nil, e.startStep(ctx, b, workerID, jobID, step, false) })
	return err
}

// StartStepApplied is StartStep answered as soon as the loop has applied
// it, before it is durable: the refusals are the same (a step cancelled
// since its claim, say), but a crash can lose a start it accepted. Only
// for a worker whose steps cannot outlive the server (the in-process
// workers, whose steps the step keeper kills with it): recovery fails
// their running steps whatever their records say. Their claims record
// the step's start already (see hand), so the report only confirms it,
// in memory, and costs no commit.
func (e *Engine) StartStepApplied(ctx context.Context, workerID, jobID, step string) error {
	_, err := e.doApplied(ctx, func(b *batch) (any, error) { return nil, e.startStep(ctx, b, workerID, jobID, step, true) })
	return err
}

// CompleteStep records a step's result, reported by the worker holding the
// step: ErrInvalid without a worker id, ErrNotFound for an unknown worker,
// job or step, ErrConflict unless the step is running and held by workerID.
func (e *Engine) CompleteStep(ctx context.Context, workerID, jobID, step string, res StepResult) error {
	_, err := e.do(ctx, func(b *batch) (any, error) { return nil, e.completeStep(ctx, b, workerID, jobID, step, res) })
	return err
}

// CompleteStepApplied is CompleteStep answered as soon as the loop has
// applied it, for the workers StartStepApplied is for: a crash can lose
// a result it accepted, as it would have lost the step's process a moment
// earlier, and recovery treats the step as a run its worker lost. Nothing
// outside the server sees the result before it is durable (events and
// answers follow the write), and the worker need not wait for an fsync
// before its next step.
func (e *Engine) CompleteStepApplied(ctx context.Context, workerID, jobID, step string, res StepResult) error {
	_, err := e.doApplied(ctx, func(b *batch) (any, error) { return nil, e.completeStep(ctx, b, workerID, jobID, step, res) })
	return err
}

// HandBackStep gives back a running step its worker stopped before the
// step ended (the in-process pool at the drain deadline of a graceful
// stop): the step is ready again, on the same attempt, and runs from the
// start on the next worker to claim it, at the latest when the server
// starts again. reason says why, in the job's _server log. The refusals
// are CompleteStep's.
func (e *Engine) HandBackStep(ctx context.Context, workerID, jobID, step, reason string) error {
	_, err := e.do(ctx, func(b *batch) (any, error) { return nil, e.handBackStep(ctx, b, workerID, jobID, step, reason) })
	return err
}

// Ready waits until Run has loaded the state and its loop answers (for
// start-up and health checks).
func (e *Engine) Ready(ctx context.Context) error {
	_, err := e.do(ctx, func(*batch) (any, error) { return nil, nil })
	return err
}
