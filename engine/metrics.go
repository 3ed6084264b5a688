package engine

import (
	"context"
	"time"
)

// Metrics observes what the orchestrator decides, for monitoring. The loop
// calls it after each commit, so an implementation must be cheap and must
// never block or call back into the engine. Config.Metrics nil = none.
//
// Labels passed are bounded sets (workspace and task names come from the
// workspace configuration, statuses and source types are enums); no job id
// is ever passed.
type Metrics interface {
	// JobCreated: a job was created (source type as in Job.SourceType).
	JobCreated(workspace, task, sourceType string)
	// JobEnded: a job reached a terminal status.
	JobEnded(status string)
	// StepEnded: a step (or for_each instance) reached a terminal status;
	// ran is how long it ran, 0 if it never started.
	StepEnded(status string, ran time.Duration)
	// StepClaimed: a worker claimed a step that had waited this long ready.
	StepClaimed(waited time.Duration)
	// Committed: one group commit of commands commands wrote records
	// records and took took.
	Committed(commands, records int, took time.Duration)
}

type noMetrics struct{}

func (noMetrics) JobCreated(string, string, string) {}
func (noMetrics) JobEnded(string)                   {}
func (noMetrics) StepEnded(string, time.Duration)   {}
func (noMetrics) StepClaimed(time.Duration)         {}
func (noMetrics) Committed(int, int, time.Duration) {}

// Stats is a snapshot of the orchestrator's live state.
type Stats struct {
	LiveJobs      int // jobs not yet ended
	ReadySteps    int // steps waiting for a worker (the queue depth)
	ParkedClaims  int // claims waiting for a step
	ActiveWorkers int // workers whose heartbeat is current
	RunningSteps  int // steps held by workers
	// Queued counts the jobs waiting for a slot, by queue (a named
	// queue, or workspace/task for a task's own limit).
	Queued map[string]int
}

// Stats takes a snapshot of the live state in the loop (for metrics and
// health: it also proves the loop answers).
func (e *Engine) Stats(ctx context.Context) (Stats, error) {
	v, err := e.do(ctx, func(*batch) (any, error) {
		s := Stats{LiveJobs: len(e.st.jobs), ReadySteps: e.st.ready.len(), ParkedClaims: e.st.waiters.len()}
		for _, w := range e.st.workers {
			if w.rec.Status == WorkerActive {
				s.ActiveWorkers++
			}
			s.RunningSteps += len(w.running)
		}
		s.Queued = e.queuedCounts()

		return s, nil
	})
	if err != nil {
		return Stats{}, err
	}
	return v.(Stats), nil
}

// observations takes a batch's metrics from its records (which may
// change before the batch is durable) and returns what reports them.
func (e *Engine) observations(b *batch) func() {
	type ended struct {
		status string
		ran    time.Duration
	}
	steps := make([]ended, 0, len(b.ended))
	for _, s := range b.ended {
		var ran time.Duration
		if s.StartedAt != nil && s.CompletedAt != nil {
			ran = s.CompletedAt.Sub(*s.StartedAt)
		}
		steps = append(steps, ended{s.Status, ran})
	}
	newJobs, endedJobs := b.newJobs, b.endedJobs // fields that never change again
	waited := b.waited
	return func() {
		m := e.metrics
		if qm, ok := m.(QueueMetrics); ok {
			for _, w := range waited {
				qm.QueueWaited(w.queue, w.waited)
			}
		}
		for _, j := range newJobs {
			m.JobCreated(j.Workspace, j.TaskName, j.SourceType)
		}
		for _, j := range endedJobs {
			m.JobEnded(j.Status)
		}
		for _, s := range steps {
			m.StepEnded(s.status, s.ran)
		}
	}
}
