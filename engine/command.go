package engine

import "context"

// command is one request to the orchestrator goroutine. apply runs inside
// the loop and may change state through the batch; its result is handed
// back only after the batch is committed.
type command struct {
	apply func(b *batch) (any, error)
	reply chan result // buffered; nil when nobody waits (timer callbacks)
	res   result
	// applied: answered once applied to memory, without waiting for its
	// batch to be durable (see StartStepApplied).
	applied bool
}

type result struct {
	val any
	err error
}

// do runs apply in the loop and waits for its committed result. If ctx ends
// after the command was queued, the command still happens; only the answer
// is lost.
func (e *Engine) do(ctx context.Context, apply func(b *batch) (any, error)) (any, error) {
	return e.run(ctx, &command{apply: apply, reply: make(chan result, 1)})
}

// doApplied is do answered once the command is applied to memory, before
// its batch is durable (see StartStepApplied).
func (e *Engine) doApplied(ctx context.Context, apply func(b *batch) (any, error)) (any, error) {
	return e.run(ctx, &command{apply: apply, reply: make(chan result, 1), applied: true})
}

func (e *Engine) run(ctx context.Context, c *command) (any, error) {
	if err := e.send(ctx, c); err != nil {
		return nil, err
	}
	select {
	case r := <-c.reply:
		return r.val, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-e.stopped:
		// The loop answers everything it took before stopping.
		select {
		case r := <-c.reply:
			return r.val, r.err
		default:
			return nil, ErrStopped
		}
	}
}

// doDetached is do for clean-up commands that must not be abandoned when
// the caller's context has ended (withdrawing or returning a claim).
func (e *Engine) doDetached(apply func(b *batch) (any, error)) (any, error) {
	return e.do(context.Background(), apply)
}

// post queues a command nobody waits for; timer callbacks use it.
func (e *Engine) post(apply func(b *batch) (any, error)) {
	_ = e.send(context.Background(), &command{apply: apply})
}

func (e *Engine) send(ctx context.Context, c *command) error {
	select {
	case <-e.stopped:
		return ErrStopped
	default:
	}
	select {
	case e.cmds <- c:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.stopped:
		return ErrStopped
	}
}
