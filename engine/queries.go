package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// DefaultPageSize is the job and worker list page when no limit is given.
const DefaultPageSize = 50

// maxWorkerSteps is how many recent steps a worker detail lists.
const maxWorkerSteps = 50

// Job returns a job and its steps, as last committed.
func (e *Engine) Job(ctx context.Context, id string) (*Job, []*Step, error) {
	j, err := e.storedJob(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// The store's error may name the job already: say it once.
		return nil, nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read job %s: %w", id, err)
	}
	steps, err := e.cfg.Store.Steps(ctx, id)
	if err != nil {
		return nil, nil, fmt.Errorf("steps of job %s: %w", id, err)
	}
	if err := e.placeQueued(ctx, []*Job{j}); err != nil {
		return nil, nil, err
	}
	return j, steps, nil
}

// storedJob reads a job from the store. A job the loop has created whose
// batch is still being written is waited for: its steps may already run
// (claims are answered from memory), and a worker's reports on them read
// the job.
func (e *Engine) storedJob(ctx context.Context, id string) (*Job, error) {
	j, err := e.cfg.Store.Job(ctx, id)
	if !errors.Is(err, ErrNotFound) {
		return j, err
	}
	if _, live := e.notify.get(id); !live {
		return nil, err
	}
	// A turn of the loop is answered once the batches before it are durable.
	if err := e.Ready(ctx); err != nil {
		return nil, err
	}
	return e.cfg.Store.Job(ctx, id)
}

// Jobs lists jobs newest first with the total matching the filter.
func (e *Engine) Jobs(ctx context.Context, f JobFilter) ([]*Job, int, error) {
	if f.TaskName != "" && f.Workspace == "" {
		return nil, 0, fmt.Errorf("%w: task_name requires workspace", ErrInvalid)
	}
	if f.Limit < 0 || f.Offset < 0 {
		return nil, 0, fmt.Errorf("%w: limit and offset must not be negative", ErrInvalid)
	}
	for _, st := range f.Statuses {
		if !ValidJobStatus(st) {
			return nil, 0, fmt.Errorf("%w: unknown job status %q", ErrInvalid, st)
		}
	}
	if f.SourceType != "" && !ValidSourceType(f.SourceType) {
		return nil, 0, fmt.Errorf("%w: unknown source_type %q", ErrInvalid, f.SourceType)
	}
	if f.Limit == 0 {
		f.Limit = DefaultPageSize
	}
	if f.Queued {
		return e.queuedJobs(ctx, f)
	}
	jobs, total, err := e.cfg.Store.Jobs(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	if err := e.placeQueued(ctx, jobs); err != nil {
		return nil, 0, err
	}
	return jobs, total, nil
}

// Workers lists workers with their total.
func (e *Engine) Workers(ctx context.Context, limit, offset int) ([]*Worker, int, error) {
	if limit < 0 || offset < 0 {
		return nil, 0, fmt.Errorf("%w: limit and offset must not be negative", ErrInvalid)
	}
	if limit == 0 {
		limit = DefaultPageSize
	}
	ws, total, err := e.cfg.Store.Workers(ctx, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list workers: %w", err)
	}
	return ws, total, nil
}

// Worker returns a worker with its most recent steps (at most 50) and their total.
func (e *Engine) Worker(ctx context.Context, id string) (*Worker, []*WorkerStep, int, error) {
	return e.WorkerFor(ctx, id, nil)
}

// WorkerFor is Worker as a caller who sees only the jobs visible accepts
// (nil: all) knows it: its most recent visible steps and their total. A
// worker that ran hidden steps costs a walk over all of its steps.
func (e *Engine) WorkerFor(ctx context.Context, id string, visible func(workspace, accessPath string) bool) (*Worker, []*WorkerStep, int, error) {
	w, err := e.cfg.Store.Worker(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, 0, fmt.Errorf("worker %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read worker %s: %w", id, err)
	}
	steps, total, err := e.cfg.Store.WorkerSteps(ctx, id, maxWorkerSteps)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("steps of worker %s: %w", id, err)
	}
	if visible == nil {
		return w, steps, total, nil
	}
	if total > len(steps) {
		if steps, _, err = e.cfg.Store.WorkerSteps(ctx, id, total); err != nil {
			return nil, nil, 0, fmt.Errorf("steps of worker %s: %w", id, err)
		}
	}
	steps = slices.DeleteFunc(steps, func(st *WorkerStep) bool { return !visible(st.Workspace, st.AccessPath) })
	return w, steps[:min(len(steps), maxWorkerSteps)], len(steps), nil
}

// WaitCancelled waits up to wait for the job to be cancelled (or to end by
// timeout) and reports whether its running steps must stop.
func (e *Engine) WaitCancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	c, j, err := e.chans(ctx, jobID)
	if err != nil {
		return false, err
	}
	if j != nil {
		return j.Status == JobCancelled, nil
	}
	select {
	case <-c.cancelled.Done():
		return true, nil
	default:
	}
	if wait <= 0 {
		return false, nil
	}
	expired := make(chan struct{})
	t := e.clock.AfterFunc(wait, func() { close(expired) })
	defer t.Stop()
	select {
	case <-c.cancelled.Done():
		return true, nil
	case <-c.done:
		// cancelled is closed before done, so this settles it.
		select {
		case <-c.cancelled.Done():
			return true, nil
		default:
			return false, nil
		}
	case <-expired:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-e.stopped:
		return false, ErrStopped
	}
}

// OnCancelled arranges for f to be called, on a goroutine of its own, if
// the job is cancelled (at once if it was); stop undoes it, reporting
// whether it did so before f was called. Unlike WaitCancelled nothing
// waits meanwhile: an in-process worker watches each running step this
// way, without a goroutine and a timer per step.
func (e *Engine) OnCancelled(ctx context.Context, jobID string, f func()) (stop func() bool, err error) {
	c, j, err := e.chans(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return context.AfterFunc(c.cancelled, f), nil
	}
	if j.Status == JobCancelled {
		go f()
		return func() bool { return false }, nil
	}
	return func() bool { return true }, nil
}

// JobDone returns a channel closed when the job is terminal (ErrNotFound).
func (e *Engine) JobDone(ctx context.Context, jobID string) (<-chan struct{}, error) {
	c, j, err := e.chans(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if j != nil {
		done := make(chan struct{})
		close(done)
		return done, nil
	}
	return c.done, nil
}

// chans returns a live job's channels, or the committed job when it is
// terminal. Live jobs are registered once committed; only before Run has
// loaded the state can a live job lack them, so then it waits for the loop.
func (e *Engine) chans(ctx context.Context, jobID string) (*jobChans, *Job, error) {
	for attempt := 0; ; attempt++ {
		if c, ok := e.notify.get(jobID); ok {
			return c, nil, nil
		}
		j, err := e.cfg.Store.Job(ctx, jobID)
		if errors.Is(err, ErrNotFound) {
			return nil, nil, fmt.Errorf("job %s: %w", jobID, ErrNotFound)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read job %s: %w", jobID, err)
		}
		if j.Terminal() {
			return nil, j, nil
		}
		if attempt > 0 {
			return nil, nil, fmt.Errorf("job %s is %s but not loaded by the engine", jobID, j.Status)
		}
		if _, err := e.do(ctx, func(*batch) (any, error) { return nil, nil }); err != nil {
			return nil, nil, err
		}
	}
}

// ParkedClaims counts the long-poll claims waiting for a step: the idle
// workers (for metrics, and for tests that must know a claim is parked
// before making work). -1 once the engine has stopped.
func (e *Engine) ParkedClaims() int {
	v, err := e.doDetached(func(*batch) (any, error) { return e.st.waiters.l.Len(), nil })
	if err != nil {
		return -1
	}
	return v.(int)
}
