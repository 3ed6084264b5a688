package engine

import (
	"context"
	"errors"

	"github.com/appliance-sh/appliance/audit"
)

// wakeAudit makes sure a commit comes for entries pushed to the audit
// queue (Config.Audit) while the loop is idle: it queues one empty
// command, unless one is queued already or the command queue is full
// (then a commit is coming anyway, and every commit takes the queue, see
// prepareCommit). It never blocks: the queue's pushers are request
// handlers refusing a flood.
func (e *Engine) wakeAudit() {
	if !e.auditWoken.CompareAndSwap(false, true) {
		return
	}
	c := &command{apply: func(*batch) (any, error) {
		e.auditWoken.Store(false)
		return nil, nil
	}}
	select {
	case e.cmds <- c:
	default:
		e.auditWoken.Store(false)
	}
}

// auditRefused queues, with outcome failed and the reason, the entry ctx
// carries (audit.WithEntry) for a command the engine refused: a cancel of
// an ended job, a re-run or an approval that does not apply (ErrConflict),
// an unknown job (ErrNotFound), bad input (ErrInvalid). A refusal changes
// nothing, so like a denied request it rides the next commit through the
// bounded queue rather than making one. Other errors (a failed commit, a
// stopped engine) are no answer about the request and record nothing.
func (e *Engine) auditRefused(ctx context.Context, action, target string, err error) {
	if e.cfg.Audit == nil || !(errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid)) {
		return
	}
	en, ok := audit.FromContext(ctx)
	if !ok {
		return
	}
	en.Action, en.Target, en.Outcome, en.Reason = action, target, audit.Failed, err.Error()
	if en.At.IsZero() {
		en.At = e.clock.Now()
	}
	e.cfg.Audit.Push(en)
}
