package app

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
)

// currentEngine is the orchestrator of a replica of a pair: the engine of
// the term it leads, or none while it follows. The API and the worker
// service hold it for the process's life, while engines come and go with
// the leadership; without one every call is refused with
// engine.ErrNotLeader (503 with Retry-After), which the API answers only
// in the moment between losing the lead and forwarding (see api/ha.go).
type currentEngine struct {
	p atomic.Pointer[engine.Engine]
}

var _ api.Orchestrator = (*currentEngine)(nil)

// set makes eng (nil: none) the engine every call goes to from now on.
func (c *currentEngine) set(eng *engine.Engine) { c.p.Store(eng) }

func (c *currentEngine) get() (*engine.Engine, error) {
	if e := c.p.Load(); e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("no orchestrator on this replica: %w", engine.ErrNotLeader)
}

// leads reports whether an engine is in place.
func (c *currentEngine) leads() bool { return c.p.Load() != nil }

func (c *currentEngine) CreateJob(ctx context.Context, req engine.CreateJob) (*engine.Job, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.CreateJob(ctx, req)
}

func (c *currentEngine) CancelJob(ctx context.Context, jobID string) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.CancelJob(ctx, jobID)
}

func (c *currentEngine) Approve(ctx context.Context, jobID, step string, a engine.Approval) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.Approve(ctx, jobID, step, a)
}

func (c *currentEngine) Job(ctx context.Context, id string) (*engine.Job, []*engine.Step, error) {
	e, err := c.get()
	if err != nil {
		return nil, nil, err
	}
	return e.Job(ctx, id)
}

func (c *currentEngine) SecretsOf(j *engine.Job, steps []*engine.Step) ([]string, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.SecretsOf(j, steps)
}

func (c *currentEngine) SecretValues(ctx context.Context, jobID string) ([]string, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.SecretValues(ctx, jobID)
}

func (c *currentEngine) Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error) {
	e, err := c.get()
	if err != nil {
		return nil, 0, err
	}
	return e.Jobs(ctx, f)
}

func (c *currentEngine) JobRecord(ctx context.Context, id string) (*engine.Job, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.JobRecord(ctx, id)
}

func (c *currentEngine) StepSummary(ctx context.Context, jobID string) (map[string]int, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.StepSummary(ctx, jobID)
}

func (c *currentEngine) StepsPage(ctx context.Context, jobID string, q engine.StepQuery) ([]*engine.Step, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.StepsPage(ctx, jobID, q)
}

func (c *currentEngine) HasStep(ctx context.Context, jobID, name string) (bool, error) {
	e, err := c.get()
	if err != nil {
		return false, err
	}
	return e.HasStep(ctx, jobID, name)
}

func (c *currentEngine) JobDone(ctx context.Context, jobID string) (<-chan struct{}, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.JobDone(ctx, jobID)
}

func (c *currentEngine) SubscribeFeed(buffer int) *engine.FeedSubscription {
	e, err := c.get()
	if err != nil {
		return engine.EndedFeed()
	}
	return e.SubscribeFeed(buffer)
}

func (c *currentEngine) SubscribeJobFeed(jobID string, buffer int) *engine.FeedSubscription {
	e, err := c.get()
	if err != nil {
		return engine.EndedFeed()
	}
	return e.SubscribeJobFeed(jobID, buffer)
}

func (c *currentEngine) Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error) {
	e, err := c.get()
	if err != nil {
		return nil, 0, err
	}
	return e.Workers(ctx, limit, offset)
}

func (c *currentEngine) WorkerFor(ctx context.Context, id string, visible func(workspace, task string) bool) (*engine.Worker, []*engine.WorkerStep, int, error) {
	e, err := c.get()
	if err != nil {
		return nil, nil, 0, err
	}
	return e.WorkerFor(ctx, id, visible)
}

func (c *currentEngine) Emit(ctx context.Context, jobID, step, run string, ems []engine.Emission) (int, <-chan struct{}, error) {
	e, err := c.get()
	if err != nil {
		return 0, nil, err
	}
	return e.Emit(ctx, jobID, step, run, ems)
}

func (c *currentEngine) RegisterWorker(ctx context.Context, name string, tags []string, inProcess bool, secretSHA256 string) (string, error) {
	e, err := c.get()
	if err != nil {
		return "", err
	}
	return e.RegisterWorker(ctx, name, tags, inProcess, secretSHA256)
}

func (c *currentEngine) WorkerCredential(workerID string) (engine.WorkerCredential, bool) {
	e, err := c.get()
	if err != nil {
		return engine.WorkerCredential{}, false
	}
	return e.WorkerCredential(workerID)
}

func (c *currentEngine) StepHolder(jobID, step string) string {
	e, err := c.get()
	if err != nil {
		return ""
	}
	return e.StepHolder(jobID, step)
}

func (c *currentEngine) Heartbeat(ctx context.Context, workerID string, running []engine.StepRef) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.Heartbeat(ctx, workerID, running)
}

func (c *currentEngine) Claim(ctx context.Context, workerID string, wait time.Duration) (*engine.Claim, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.Claim(ctx, workerID, wait)
}

func (c *currentEngine) ClaimKind(ctx context.Context, workerID string, wait time.Duration, kind engine.StepKind) (*engine.Claim, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.ClaimKind(ctx, workerID, wait, kind)
}

func (c *currentEngine) CreateLocalJob(ctx context.Context, workerID string, req engine.CreateJob) (*engine.Job, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.CreateLocalJob(ctx, workerID, req)
}

func (c *currentEngine) ClaimJob(ctx context.Context, workerID, jobID string, wait time.Duration) (*engine.Claim, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.ClaimJob(ctx, workerID, jobID, wait)
}

func (c *currentEngine) CompleteJob(ctx context.Context, workerID, jobID string) (*engine.Job, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.CompleteJob(ctx, workerID, jobID)
}

func (c *currentEngine) StartStep(ctx context.Context, workerID, jobID, step string) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.StartStep(ctx, workerID, jobID, step)
}

func (c *currentEngine) StartStepApplied(ctx context.Context, workerID, jobID, step string) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.StartStepApplied(ctx, workerID, jobID, step)
}

func (c *currentEngine) CompleteStep(ctx context.Context, workerID, jobID, step string, res engine.StepResult) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.CompleteStep(ctx, workerID, jobID, step, res)
}

func (c *currentEngine) CompleteStepApplied(ctx context.Context, workerID, jobID, step string, res engine.StepResult) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.CompleteStepApplied(ctx, workerID, jobID, step, res)
}

func (c *currentEngine) HandBackStep(ctx context.Context, workerID, jobID, step, reason string) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.HandBackStep(ctx, workerID, jobID, step, reason)
}

func (c *currentEngine) CheckHolder(ctx context.Context, workerID, jobID, step string) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.CheckHolder(ctx, workerID, jobID, step)
}

func (c *currentEngine) WaitCancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	e, err := c.get()
	if err != nil {
		return false, err
	}
	return e.WaitCancelled(ctx, jobID, wait)
}

func (c *currentEngine) OnCancelled(ctx context.Context, jobID string, f func()) (func() bool, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.OnCancelled(ctx, jobID, f)
}

func (c *currentEngine) AppendRunLog(jobID, step, run string, lines []engine.LogLine) error {
	e, err := c.get()
	if err != nil {
		return err
	}
	return e.AppendRunLog(jobID, step, run, lines)
}

// Stats is the metrics' snapshot: an empty one while following (the
// leader's /metrics has the live state).
func (c *currentEngine) Stats(ctx context.Context) (engine.Stats, error) {
	e := c.p.Load()
	if e == nil {
		return engine.Stats{}, nil
	}
	return e.Stats(ctx)
}

// Ready is /healthz's loop check: nothing to check while following.
func (c *currentEngine) Ready(ctx context.Context) error {
	e := c.p.Load()
	if e == nil {
		return nil
	}
	return e.Ready(ctx)
}

// LiveRevisions is the revision sweeper's, which runs only on the leader.
func (c *currentEngine) LiveRevisions(ctx context.Context) (map[string]map[string]bool, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.LiveRevisions(ctx)
}

func (c *currentEngine) Queues(ctx context.Context) ([]engine.QueueView, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.Queues(ctx)
}

func (c *currentEngine) SetPriority(ctx context.Context, jobID string, priority int) (*engine.Job, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.SetPriority(ctx, jobID, priority)
}

func (c *currentEngine) ClaimStepsReporting(ctx context.Context, workerID string, results []engine.StepReport, max int) ([]error, []*engine.Claim, error) {
	e, err := c.get()
	if err != nil {
		return nil, nil, err
	}
	return e.ClaimStepsReporting(ctx, workerID, results, max)
}

func (c *currentEngine) ClaimSteps(ctx context.Context, workerID string, wait time.Duration, max int) ([]*engine.Claim, error) {
	e, err := c.get()
	if err != nil {
		return nil, err
	}
	return e.ClaimSteps(ctx, workerID, wait, max)
}
