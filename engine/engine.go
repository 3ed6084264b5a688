// Package engine orchestrates jobs: one goroutine owns every job, step and
// worker state change, persists each decision (group-committed) before it
// answers, and hands ready steps to workers through long-poll claims.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// errUnimplemented marks the skeleton; the engine work replaces it.
var errUnimplemented = errors.New("engine: not implemented yet")

// Config wires an Engine.
type Config struct {
	Store      Store
	Workspaces Workspaces
	Logs       LogSink
	Clock      Clock        // nil = the real clock
	Logger     *slog.Logger // nil = slog.Default()
	// HeartbeatTimeout is how long a remote worker may stay silent before it
	// is inactive and its running steps fail (3 heartbeat intervals).
	HeartbeatTimeout time.Duration
}

// Engine is the orchestrator.
type Engine struct {
	cfg Config
}

// New returns an engine; call Run to start it.
func New(cfg Config) (*Engine, error) { return &Engine{cfg: cfg}, nil }

// Run loads the active state from the store and runs the orchestration loop
// until ctx ends. Commands sent before Run starts wait for it.
func (e *Engine) Run(ctx context.Context) error { return errUnimplemented }

// CreateJob creates a job (input defaults applied and validated: ErrInvalid
// naming the field) and returns it once durable.
func (e *Engine) CreateJob(ctx context.Context, req CreateJob) (*Job, error) {
	return nil, errUnimplemented
}

// CancelJob cancels a non-terminal job (ErrConflict when terminal, ErrNotFound).
func (e *Engine) CancelJob(ctx context.Context, jobID string) error { return errUnimplemented }

// RegisterWorker records a worker and returns its id. In-process workers
// never time out.
func (e *Engine) RegisterWorker(ctx context.Context, name string, tags []string, inProcess bool) (string, error) {
	return "", errUnimplemented
}

// Heartbeat marks a worker alive (ErrNotFound for an unknown worker).
func (e *Engine) Heartbeat(ctx context.Context, workerID string) error { return errUnimplemented }

// Claim hands the worker the oldest ready step whose required tags it has,
// waiting up to wait for one; nil without error means no work.
func (e *Engine) Claim(ctx context.Context, workerID string, tags []string, wait time.Duration) (*Claim, error) {
	return nil, errUnimplemented
}

// StartStep records that the worker started a claimed step.
func (e *Engine) StartStep(ctx context.Context, workerID, jobID, step string) error {
	return errUnimplemented
}

// CompleteStep records a step's result. workerID may be empty; when set it
// must be the holder's. ErrConflict unless the step is running.
func (e *Engine) CompleteStep(ctx context.Context, workerID, jobID, step string, res StepResult) error {
	return errUnimplemented
}

// WaitCancelled waits up to wait for the job to be cancelled (or to end by
// timeout) and reports whether its running steps must stop.
func (e *Engine) WaitCancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	return false, errUnimplemented
}

// JobDone returns a channel closed when the job is terminal (ErrNotFound).
func (e *Engine) JobDone(ctx context.Context, jobID string) (<-chan struct{}, error) {
	return nil, errUnimplemented
}

// Job returns a job and its steps, as last committed.
func (e *Engine) Job(ctx context.Context, id string) (*Job, []*Step, error) {
	return nil, nil, errUnimplemented
}

// Jobs lists jobs newest first with the total matching the filter.
func (e *Engine) Jobs(ctx context.Context, f JobFilter) ([]*Job, int, error) {
	return nil, 0, errUnimplemented
}

// Workers lists workers with their total.
func (e *Engine) Workers(ctx context.Context, limit, offset int) ([]*Worker, int, error) {
	return nil, 0, errUnimplemented
}

// Worker returns a worker with its most recent steps (at most 50) and their total.
func (e *Engine) Worker(ctx context.Context, id string) (*Worker, []*WorkerStep, int, error) {
	return nil, nil, 0, errUnimplemented
}
