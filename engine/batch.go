package engine

import (
	"context"
	"time"

	"github.com/appliance-sh/appliance/audit"
)

// batch collects what one turn of the loop changed: the records to commit
// together and the side effects that may happen only once they are durable.
type batch struct {
	now time.Time

	jobs      map[*Job]struct{}
	jobList   []*Job
	steps     map[*Step]struct{}
	stepList  []*Step
	workers   map[*Worker]struct{}
	workerLst []*Worker
	fires     []TriggerFire

	logs       []jobLine
	logMasks   map[string]*secretSet // secrets of ended jobs that log here (see maskAs)
	finished   []*jobState           // terminal: notify, finish logs, drop from memory
	ended      []*Step               // step runs that ended: tell a StepLogEnder
	endsLogged int                   // how many of ended the StepLogEnder was told of
	newJobs    []*Job                // jobs created (for metrics)
	endedJobs  []*Job                // jobs that reached a terminal status (for metrics)
	deliveries []delivery            // claims answered in this batch
	durable    []delivery            // claims answered once the batch is durable (see ClaimSteps)
	after      []func()              // timers to arm
	marks      []EventMark           // event sources' progress (see Emit)
	waited     []queueWait           // queued jobs started, and how long they waited (for metrics)
	audit      []audit.Entry         // the audit trail's entries (see audited)

	// reporting is the worker whose claim's results are being recorded
	// (see ClaimStepsReporting): a step they make ready is kept from that
	// worker's parked claims, for the claim itself; kept lists them, to
	// offer again those it leaves.
	reporting string
	kept      []keptStep
}

type keptStep struct {
	js *jobState
	ss *stepState
}

type jobLine struct {
	jobID string
	line  LogLine
}

// delivery is the answer to a parked or fresh claim.
type delivery struct {
	w      *waiter
	result claimResult
}

func newBatch(now time.Time) *batch {
	return &batch{
		now:     now,
		jobs:    map[*Job]struct{}{},
		steps:   map[*Step]struct{}{},
		workers: map[*Worker]struct{}{},
	}
}

func (b *batch) dirtyJob(j *Job) {
	if _, ok := b.jobs[j]; !ok {
		b.jobs[j] = struct{}{}
		b.jobList = append(b.jobList, j)
	}
}

func (b *batch) dirtyStep(s *Step) {
	if _, ok := b.steps[s]; !ok {
		b.steps[s] = struct{}{}
		b.stepList = append(b.stepList, s)
	}
}

func (b *batch) dirtyWorker(w *Worker) {
	if _, ok := b.workers[w]; !ok {
		b.workers[w] = struct{}{}
		b.workerLst = append(b.workerLst, w)
	}
}

func (b *batch) empty() bool {
	return len(b.jobList) == 0 && len(b.stepList) == 0 && len(b.workerLst) == 0 && len(b.fires) == 0 && len(b.marks) == 0 && len(b.audit) == 0
}

// audited records, with the batch's changes, the audit entry ctx carries
// (audit.WithEntry: who asked, from where): the store writes it in the
// same transaction, so the change and its entry are durable together or
// not at all. A command without one (a hook's job, a child) records none.
func (b *batch) audited(ctx context.Context, action, target string) {
	e, ok := audit.FromContext(ctx)
	if !ok {
		return
	}
	e.Action, e.Target = action, target
	if e.At.IsZero() {
		e.At = b.now
	}
	if e.Outcome == "" {
		e.Outcome = audit.OK
	}
	b.audit = append(b.audit, e)
}

// maskAs masks the lines this batch logs for js's job with js's secrets:
// for a job that has ended (so is no longer in the secret registry) and
// still logs, as when its hooks start after rendering.
func (b *batch) maskAs(js *jobState) {
	if b.logMasks == nil {
		b.logMasks = map[string]*secretSet{}
	}
	b.logMasks[js.job.ID] = js.secretSet()
}

// serverLog queues a `_server` line for the job's log, stored before the
// batch is written (see prepareCommit).
func (b *batch) serverLog(jobID, text string) {
	b.logs = append(b.logs, jobLine{jobID: jobID, line: LogLine{TS: b.now, Stream: "stderr", Step: ServerStep, Line: text}})
}

// afterCommit runs f once the batch is durable (arming timers).
func (b *batch) afterCommit(f func()) { b.after = append(b.after, f) }

func (b *batch) deliver(w *waiter, c *Claim, err error) {
	b.answer(w, claimResult{claim: c, err: err})
}

// settle answers a claim of several steps with what it took, once the
// batch is durable.
func (b *batch) settle(w *waiter) {
	w.answered = true
	b.durable = append(b.durable, delivery{w: w, result: claimResult{claim: w.took[0].claim, many: w.took}})
}

// answer gives a claim its result, sent as the loop's turn ends.
func (b *batch) answer(w *waiter, r claimResult) {
	w.answered = true
	b.deliveries = append(b.deliveries, delivery{w: w, result: r})
}
