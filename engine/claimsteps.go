package engine

import (
	"context"
	"time"
)

// MaxClaimSteps bounds the steps one ClaimSteps takes.
const MaxClaimSteps = 64

// ClaimSteps hands the worker up to max of the oldest ready steps its tags
// cover (at least one), waiting up to wait for the first; none without
// error means no work. Unlike Claim, it starts the steps (started_at is
// the claim's time) and answers once that is durable: the worker runs
// them at once and sends no start report, since a crash cannot forget
// that it holds them. Remote workers claim so: a step's path holds one
// commit, shared by every step of the claim and the reports of the same
// turn, instead of a claim answered from memory and then a start report
// whose commit the worker waits for. A step whose claim answer was lost
// on the way (its worker never names it) is put back as an unstarted one
// (see reconcile), until the worker says it has it.
func (e *Engine) ClaimSteps(ctx context.Context, workerID string, wait time.Duration, max int) ([]*Claim, error) {
	max = min(MaxClaimSteps, max)
	if max < 1 {
		max = 1
	}
	src := claimSource{kind: AllSteps, offer: e.claim, withdraw: e.withdraw}
	for {
		r := e.claimOnceWith(ctx, workerID, wait, src, func(w *waiter) { w.many, w.max = true, max })
		if r.err != nil || len(r.many) == 0 {
			return nil, r.err
		}
		claims, err := e.rendered(workerID, r.many)
		if err != nil || len(claims) > 0 {
			return claims, err
		}
		wait = 0 // every one failed to render: look once more
	}
}

// StepReport is one result a claim carries (see ClaimStepsReporting).
type StepReport struct {
	JobID, Step string
	Result      StepResult
}

// ClaimStepsReporting is ClaimSteps carrying results of steps the worker
// holds: one command records them, then claims, so the results and the
// claimed steps are durable in one commit (a remote step's path then
// holds one commit, not one for its result and one for the next claim),
// and a step a result made ready may be among those claimed. errs answers
// each result as CompleteStep would have; a result refused leaves the
// others and the claim be. It never waits for work: results must not wait
// on a long-poll, so no steps without error means none was ready.
func (e *Engine) ClaimStepsReporting(ctx context.Context, workerID string, results []StepReport, max int) (errs []error, claims []*Claim, err error) {
	max = min(MaxClaimSteps, max)
	if max < 1 {
		max = 1
	}
	errs = make([]error, len(results))
	w := newWaiter(workerID)
	w.kind, w.many, w.max = AllSteps, true, max
	// Answered once durable: the claim's answer too is in w.got by then.
	if _, err := e.do(ctx, func(b *batch) (any, error) {
		// A step the results make ready goes to this claim rather than to
		// one of the worker's claims waiting for work: the same worker
		// either way, and the claim's slot is the one free now (the step
		// is not first handed to the waiting claim and this one answered
		// empty, a second request for the worker). What the claim leaves
		// is offered to the waiting claims after it.
		b.reporting = workerID
		for i, r := range results {
			errs[i] = e.completeStep(ctx, b, workerID, r.JobID, r.Step, r.Result)
		}
		b.reporting = ""
		e.claim(b, w, false)
		e.offerKept(b)
		return nil, nil
	}); err != nil {
		return nil, nil, err
	}
	r := <-w.got
	if r.err != nil || len(r.many) == 0 {
		return errs, nil, r.err
	}
	claims, err = e.rendered(workerID, r.many)
	return errs, claims, err
}

// rendered renders the action specs of the steps a claim of several took,
// off the loop; a step whose spec does not render fails, and is left out.
func (e *Engine) rendered(workerID string, took []claimResult) ([]*Claim, error) {
	claims := make([]*Claim, 0, len(took))
	for _, c := range took {
		if c.render == nil {
			claims = append(claims, c.claim)
			continue
		}
		err := e.pool.run(func(ctx context.Context) error { return c.render(ctx, c.claim) })
		if err == nil {
			claims = append(claims, c.claim)
			continue
		}
		_, ferr := e.doDetached(func(b *batch) (any, error) {
			e.failClaimed(b, workerID, c.claim.JobID, c.claim.StepName, err.Error())
			return nil, nil
		})
		if ferr != nil {
			return claims, ferr
		}
	}
	return claims, nil
}
