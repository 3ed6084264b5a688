package worker

import (
	"context"
	"time"
)

// claimPump claims for every slot of a worker whose server hands several
// steps per claim (see StepsClaimer): the slots that want a step when a
// claim goes out share it, asking for as many steps as they are, and a
// slot that got none waits for the next claim. One long-poll stands for
// the worker's idle slots, instead of one each.
type claimPump struct {
	w     *Worker
	sc    StepsClaimer
	wants chan chan claimAnswer
}

// claimAnswer is what a slot gets from the pump: a step, durable, or an
// error of the claim (the slot handles it as its own: it registers again,
// backs off or stops).
type claimAnswer struct {
	a   *Assignment
	err error
}

func newClaimPump(w *Worker, sc StepsClaimer) *claimPump {
	// Room for every slot: a slot's want waits for the pump, not the
	// other way round.
	return &claimPump{w: w, sc: sc, wants: make(chan chan claimAnswer, w.cfg.MaxConcurrent)}
}

// next waits for the slot's next step; nil without error when ctx ended.
func (p *claimPump) next(ctx context.Context) (*Assignment, error) {
	got := make(chan claimAnswer, 1)
	select {
	case p.wants <- got:
	case <-ctx.Done():
		return nil, nil
	}
	select {
	case ans := <-got:
		return ans.a, ans.err
	case <-ctx.Done():
		// A step the pump hands this slot now is never run nor named in a
		// heartbeat: the server puts it back (see engine reconcile).
		return nil, nil
	}
}

// run claims for the waiting slots until ctx ends.
func (p *claimPump) run(ctx context.Context) {
	var waiting []chan claimAnswer
	for {
		if len(waiting) == 0 {
			select {
			case ch := <-p.wants:
				waiting = append(waiting, ch)
			case <-ctx.Done():
				return
			}
		}
	more:
		for len(waiting) < p.w.cfg.MaxConcurrent {
			select {
			case ch := <-p.wants:
				waiting = append(waiting, ch)
			default:
				break more
			}
		}
		began := time.Now()
		as, err := p.sc.ClaimSteps(ctx, p.w.ID(), len(waiting))
		if ctx.Err() != nil {
			for i, a := range as {
				if i < len(waiting) {
					waiting[i] <- claimAnswer{a: a}
				}
			}
			return
		}
		if err != nil {
			for _, ch := range waiting {
				ch <- claimAnswer{err: err}
			}
			waiting = waiting[:0]
			continue
		}
		n := min(len(as), len(waiting))
		for i := range n {
			waiting[i] <- claimAnswer{a: as[i]}
		}
		if len(as) > n {
			// More than asked for: not from this server. They are held
			// and never run: the server puts them back.
			p.w.log.Warn("the server handed more steps than claimed: leaving the rest to it", "claimed", len(waiting), "got", len(as))
		}
		waiting = append(waiting[:0], waiting[n:]...)
		if len(as) == 0 {
			// No result is held for the claim after the pause.
			resume := func() {}
			if rp, ok := p.sc.(resultPairer); ok {
				resume = rp.holdNone()
			}
			sleep(ctx, p.w.cfg.IdlePause-time.Since(began))
			resume()
		}
	}
}
