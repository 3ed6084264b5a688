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
		claims := make([]*Claim, 0, len(r.many))
		for _, c := range r.many {
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
		if len(claims) > 0 {
			return claims, nil
		}
		wait = 0 // every one failed to render: look once more
	}
}
