package app

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// supervisor runs the server's long-lived components (orchestrator,
// scheduler, HTTP server, in-process workers, workspace watcher, retention
// sweeper). Each has a context of its own, so Shutdown stops them in its
// own order; the first to fail, or to stop without being asked, ends
// failed(), which makes `appliance serve` shut down and exit non-zero
// naming it. A server whose orchestrator died must not go on answering
// "ok".
type supervisor struct {
	group  *errgroup.Group
	failed context.Context
}

func newSupervisor() *supervisor {
	g, ctx := errgroup.WithContext(context.Background())
	return &supervisor{group: g, failed: ctx}
}

// component is one supervised goroutine.
type component struct {
	cancel context.CancelFunc
	// abort cancels with a cause the component may act on (the in-process
	// pool stops without a drain on worker.ErrStopNow).
	abort context.CancelCauseFunc
	done  chan struct{}
}

// errStoppedByItself is the failure of a component that returned while
// nobody had asked it to stop.
var errStoppedByItself = errors.New("stopped by itself")

// start runs run under the supervisor; name says what it is in the error.
func (sv *supervisor) start(name string, run func(ctx context.Context) error) *component {
	ctx, abort := context.WithCancelCause(context.Background())
	c := &component{cancel: func() { abort(nil) }, abort: abort, done: make(chan struct{})}
	sv.group.Go(func() error {
		defer close(c.done)
		err := run(ctx)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return nil // asked to stop
		}
		if err == nil {
			err = errStoppedByItself
		}
		return fmt.Errorf("%s: %w", name, err)
	})
	return c
}

// stop asks the component to stop and waits until it has (nil: nothing).
func (c *component) stop() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
}

// wait waits for every component and returns the first failure.
func (sv *supervisor) wait() error { return sv.group.Wait() }

// stopWith is stop with cause as the context's cause.
func (c *component) stopWith(cause error) {
	if c == nil {
		return
	}
	c.abort(cause)
	<-c.done
}
