package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// StepQuery selects a page of a job's steps in the job's order (Seq).
type StepQuery struct {
	Statuses []string // optional: any of these
	After    int      // only steps with Seq > After; -1 from the first
	Limit    int
	FlowOnly bool // pass over for_each instances
}

// StepPager is what a Store may add to serve big jobs without reading
// every step record: maintained counts per status, and pages from a
// position. The engine falls back to Steps without it.
type StepPager interface {
	StepSummary(ctx context.Context, jobID string) (map[string]int, error)
	StepsPage(ctx context.Context, jobID string, q StepQuery) ([]*Step, error)
	// HasStep says whether the job has a step record of that name.
	HasStep(ctx context.Context, jobID, name string) (bool, error)
}

// JobRecord is a job's record without its steps (ErrNotFound).
func (e *Engine) JobRecord(ctx context.Context, id string) (*Job, error) {
	j, err := e.cfg.Store.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// The store's error may name the job already: say it once.
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	if err := e.placeQueued(ctx, []*Job{j}); err != nil {
		return nil, err
	}
	return j, nil
}

// StepSummary counts a job's step records per status.
func (e *Engine) StepSummary(ctx context.Context, jobID string) (map[string]int, error) {
	if p, ok := e.cfg.Store.(StepPager); ok {
		return p.StepSummary(ctx, jobID)
	}
	steps, err := e.cfg.Store.Steps(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	out := map[string]int{}
	for _, s := range steps {
		out[s.Status]++
	}
	return out, nil
}

// HasStep says whether a job has a step of that name, without reading
// every step record where the store can.
func (e *Engine) HasStep(ctx context.Context, jobID, name string) (bool, error) {
	if p, ok := e.cfg.Store.(StepPager); ok {
		return p.HasStep(ctx, jobID, name)
	}
	steps, err := e.cfg.Store.Steps(ctx, jobID)
	if err != nil {
		return false, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	return slices.ContainsFunc(steps, func(s *Step) bool { return s.Name == name }), nil
}

// StepsPage returns a page of a job's steps (see StepQuery).
func (e *Engine) StepsPage(ctx context.Context, jobID string, q StepQuery) ([]*Step, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPageSize
	}
	if p, ok := e.cfg.Store.(StepPager); ok {
		return p.StepsPage(ctx, jobID, q)
	}
	steps, err := e.cfg.Store.Steps(ctx, jobID)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", jobID, err)
	}
	var out []*Step
	for _, s := range steps {
		if len(out) == q.Limit {
			break
		}
		if s.Seq <= q.After || len(q.Statuses) > 0 && !slices.Contains(q.Statuses, s.Status) ||
			q.FlowOnly && s.FlowStep != "" && s.FlowStep != s.Name {
			continue
		}
		out = append(out, s)
	}
	return out, nil
}
