package engine

import (
	"context"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
)

// Concurrency policies of a trigger: what a new run does about the runs of
// the same trigger that are still live.
const (
	ConcurrencyAllow          = "allow"
	ConcurrencySkip           = "skip"
	ConcurrencyCancelPrevious = "cancel_previous"
)

// CreateTriggered creates a job for a trigger or a webhook (req.SourceType
// is SourceTrigger or SourceWebhook, req.SourceID names it) under a
// concurrency policy ("" is allow). The look at the trigger's live jobs and
// the creation are one loop command, so two runs can never both see "none
// live" or miss each other:
//   - allow: the job is created as CreateJob does;
//   - skip: while a job of the same source is live, the new job is only a
//     record with status skipped: no step records, completed_at set, and no
//     hooks (nothing ran); otherwise it is created normally;
//   - cancel_previous: every live job of the source is cancelled as
//     CancelJob does (its on_error hooks fire), then the job is created.
func (e *Engine) CreateTriggered(ctx context.Context, req CreateJob, concurrency string) (*Job, error) {
	if req.SourceType != SourceTrigger && req.SourceType != SourceWebhook {
		return nil, fmt.Errorf("%w: triggered job source type %q (want %s or %s)", ErrInvalid, req.SourceType, SourceTrigger, SourceWebhook)
	}
	if req.SourceID == nil || *req.SourceID == "" {
		return nil, fmt.Errorf("%w: triggered job without a source id", ErrInvalid)
	}
	switch concurrency {
	case "", ConcurrencyAllow, ConcurrencySkip, ConcurrencyCancelPrevious:
	default:
		return nil, fmt.Errorf("%w: unknown concurrency %q (one of: allow, skip, cancel_previous)", ErrInvalid, concurrency)
	}
	var fire *TriggerFire
	if req.Fire != nil {
		if req.SourceType != SourceTrigger || req.Fire.Workspace == "" || req.Fire.Trigger == "" {
			return nil, fmt.Errorf("%w: a trigger fire needs a trigger job, a workspace and a trigger name", ErrInvalid)
		}
		f := *req.Fire
		f.At = f.At.UTC()
		fire = &f
	}
	js, err := e.buildJobBounded(req)
	if err != nil {
		return nil, err
	}
	source := *req.SourceID
	if _, ok := audit.FromContext(ctx); !ok {
		// A trigger acts on its own: it is the actor.
		ctx = audit.WithEntry(ctx, audit.Entry{Actor: audit.Actor{ID: source}, Source: req.SourceType})
	}
	v, err := e.do(ctx, func(b *batch) (any, error) {
		if fire != nil {
			b.fires = append(b.fires, *fire)
		}
		b.audited(ctx, audit.JobExecute, "job/"+js.job.ID)
		if concurrency == "" || concurrency == ConcurrencyAllow {
			return e.insertJob(b, js), nil
		}
		live := e.liveFromSource(req.SourceType, source)
		if concurrency == ConcurrencySkip && len(live) > 0 {
			return e.insertSkipped(b, js, live[0]), nil
		}
		for _, prev := range live {
			e.stopJob(b, prev, JobCancelled, fmt.Sprintf("cancelled by a newer run of trigger %s (job %s)", source, js.job.ID))
		}
		return e.insertJob(b, js), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Job), nil
}

// liveFromSource lists the non-terminal jobs a trigger or webhook created.
// Every live job is in memory, so a scan of them is the whole truth; it
// runs only for the skip and cancel_previous policies.
func (e *Engine) liveFromSource(sourceType, sourceID string) []*jobState {
	var out []*jobState
	for _, js := range e.st.jobs {
		j := js.job
		if !j.Terminal() && j.SourceType == sourceType && j.SourceID != nil && *j.SourceID == sourceID {
			out = append(out, js)
		}
	}
	return out
}

// insertSkipped commits a built job as a skipped record only: it never
// enters the live state, has no steps and fires no hooks. A `_server` line
// says which run it gave way to.
func (e *Engine) insertSkipped(b *batch, js *jobState, running *jobState) *Job {
	now := b.now
	js.job.Status = JobSkipped
	js.job.CompletedAt = &now
	js.job.Deadline = nil
	b.dirtyJob(js.job)
	b.serverLog(js.job.ID, fmt.Sprintf("skipped: job %s of %s is still %s (concurrency: skip)",
		running.job.ID, *js.job.SourceID, running.job.Status))
	// finished ends its log stream; it has no channels and is not in the map.
	b.finished = append(b.finished, js)
	b.newJobs = append(b.newJobs, js.job)
	b.endedJobs = append(b.endedJobs, js.job)
	c := *js.job
	return &c
}
