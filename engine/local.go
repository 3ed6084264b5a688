package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// SourceLocal is the source of a job a worker runs whole on its own machine
// (local execution mode); the job's source_id is that worker's id.
const SourceLocal = "local"

// Local execution mode: a worker creates a job it holds whole. The engine
// still owns every decision (promotion, `when`, for_each, retries, the
// job's end), but the job's ready steps are never filed in the ready index:
// only its holder claims them, through ClaimJob, and reports them through
// the usual start, log and complete calls. CompleteJob is its last word.

// localHolder returns the worker holding a local job, or "".
func localHolder(j *Job) string {
	if j.SourceType != SourceLocal || j.SourceID == nil {
		return ""
	}
	return *j.SourceID
}

// CreateLocalJob creates a job of req's task held by a remote worker, which
// alone runs its worker steps (ErrNotFound for an unknown worker,
// ErrConflict for an inactive or in-process one).
func (e *Engine) CreateLocalJob(ctx context.Context, workerID string, req CreateJob) (*Job, error) {
	if workerID == "" {
		return nil, fmt.Errorf("%w: worker_id is required", ErrInvalid)
	}
	if req.Fire != nil || req.Rerun != nil {
		return nil, fmt.Errorf("%w: a local job is neither a trigger's nor a re-run", ErrInvalid)
	}
	req.SourceType, req.SourceID = SourceLocal, &workerID
	js, err := e.buildJobBounded(req)
	if err != nil {
		return nil, err
	}
	v, err := e.do(ctx, func(b *batch) (any, error) {
		wk, ok := e.st.workers[workerID]
		switch {
		case !ok:
			return nil, fmt.Errorf("worker %s: %w", workerID, ErrNotFound)
		case wk.rec.InProcess:
			return nil, fmt.Errorf("worker %s is an in-process worker; local jobs are run by remote workers: %w", workerID, ErrConflict)
		}
		e.touchWorker(b, wk)
		return e.insertJob(b, js), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Job), nil
}

// ClaimJob hands the holder of a local job its oldest ready step, waiting
// up to wait for one; nil without error means none is ready yet. Tags are
// not matched: the worker asked to run the whole job itself. ErrConflict
// once the job has ended, or for a job that is not local or is another
// worker's. The action spec renders here, as for Claim.
func (e *Engine) ClaimJob(ctx context.Context, workerID, jobID string, wait time.Duration) (*Claim, error) {
	return e.claimFrom(ctx, workerID, wait, claimSource{
		offer:    func(b *batch, w *waiter, park bool) { e.claimLocal(b, w, jobID, park) },
		withdraw: func(w *waiter) bool { return e.withdrawLocal(w, jobID) },
	})
}

// localJob finds a live local job held by workerID.
func (e *Engine) localJob(workerID, jobID string) (*jobState, error) {
	js, err := e.liveJob(context.Background(), jobID)
	if err != nil {
		return nil, err
	}
	switch holder := localHolder(js.job); {
	case holder == "":
		return nil, fmt.Errorf("job %s is not a local job (source_type %s): its steps are claimed one by one: %w",
			jobID, js.job.SourceType, ErrConflict)
	case holder != workerID:
		return nil, fmt.Errorf("job %s is held by worker %s, not %s: %w", jobID, holder, workerID, ErrConflict)
	}
	return js, nil
}

func (e *Engine) claimLocal(b *batch, w *waiter, jobID string, park bool) {
	wk, ok := e.st.workers[w.workerID]
	if !ok {
		b.deliver(w, nil, fmt.Errorf("worker %s: %w", w.workerID, ErrNotFound))
		return
	}
	js, err := e.localJob(w.workerID, jobID)
	if err != nil {
		b.deliver(w, nil, err)
		return
	}
	if wk.rec.Status != WorkerActive {
		e.touchWorker(b, wk)
	}
	if ss := readyStepOf(js); ss != nil {
		e.hand(b, js, ss, wk, w)
		return
	}
	if !park {
		b.deliver(w, nil, nil)
		return
	}
	js.localWaiters = append(js.localWaiters, w)
}

// readyStepOf returns a job's first ready step in display order.
func readyStepOf(js *jobState) *stepState {
	var first *stepState
	js.each(func(ss *stepState) {
		if ss.rec.Status == StepReady && (first == nil || ss.rec.Seq < first.rec.Seq) {
			first = ss
		}
	})
	return first
}

// withdrawLocal takes a giving-up local claim off its job and reports
// whether the loop had already handed it a step.
func (e *Engine) withdrawLocal(w *waiter, jobID string) bool {
	if js, ok := e.st.jobs[jobID]; ok {
		for i, x := range js.localWaiters {
			if x == w {
				js.localWaiters = append(js.localWaiters[:i], js.localWaiters[i+1:]...)
				return false
			}
		}
	}
	return w.assigned
}

// offerLocal gives a newly ready step of a local job to its holder's
// parked claim, if one waits; otherwise the step waits, ready, for the
// holder's next claim. It is never filed in the ready index.
func (e *Engine) offerLocal(b *batch, js *jobState, ss *stepState) {
	if len(js.localWaiters) == 0 {
		return
	}
	w := js.localWaiters[0]
	js.localWaiters = js.localWaiters[1:]
	wk, ok := e.st.workers[w.workerID]
	if !ok {
		b.deliver(w, nil, fmt.Errorf("worker %s: %w", w.workerID, ErrNotFound))
		return
	}
	e.hand(b, js, ss, wk, w)
}

// localJobEnded answers the parked claims of an ended local job.
func (e *Engine) localJobEnded(b *batch, js *jobState) {
	for _, w := range js.localWaiters {
		b.deliver(w, nil, fmt.Errorf("job %s is %s: %w", js.job.ID, js.job.Status, ErrConflict))
	}
	js.localWaiters = nil
}

// CompleteJob is a local job's holder saying it has run the job: the job
// ends now if it has not already (it ends by itself once every step is
// terminal); a step still unfinished will never run, so it is cancelled
// and the job fails. The job's output is, as for every job, its sink
// steps' outputs. It returns the job's final status. ErrNotFound for an
// unknown job; ErrConflict for a job that is not local or is another
// worker's.
func (e *Engine) CompleteJob(ctx context.Context, workerID, jobID string) (*Job, error) {
	if workerID == "" {
		return nil, fmt.Errorf("%w: worker_id is required", ErrInvalid)
	}
	v, err := e.do(ctx, func(b *batch) (any, error) {
		js, ok := e.st.jobs[jobID]
		if !ok || js.job.Terminal() {
			j, err := e.cfg.Store.Job(ctx, jobID)
			if err != nil {
				return nil, fmt.Errorf("job %s: %w", jobID, err)
			}
			if js != nil {
				j = js.job
			}
			if holder := localHolder(j); holder != workerID {
				if holder == "" {
					return nil, fmt.Errorf("job %s is not a local job (source_type %s): %w", jobID, j.SourceType, ErrConflict)
				}
				return nil, fmt.Errorf("job %s is held by worker %s, not %s: %w", jobID, holder, workerID, ErrConflict)
			}
			c := *j
			return &c, nil
		}
		js, err := e.localJob(workerID, jobID)
		if err != nil {
			return nil, err
		}
		var left []string
		js.each(func(ss *stepState) {
			if !ss.terminal() {
				left = append(left, ss.rec.Name)
			}
		})
		sort.Strings(left)
		e.stopJob(b, js, JobFailed, fmt.Sprintf("the local worker completed the job with steps not run: %s", strings.Join(left, ", ")))
		c := *js.job
		return &c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Job), nil
}

// loseLocalJobs fails the local jobs a lost worker held: nobody else may
// run their steps.
func (e *Engine) loseLocalJobs(b *batch, wk *workerState) {
	var lost []*jobState
	for _, js := range e.st.jobs {
		if !js.job.Terminal() && localHolder(js.job) == wk.rec.ID {
			lost = append(lost, js)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].job.ID < lost[j].job.ID })
	for _, js := range lost {
		e.stopJob(b, js, JobFailed, fmt.Sprintf("local worker %s was lost (no heartbeat)", wk.rec.Name))
	}
}
