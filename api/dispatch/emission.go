package dispatch

import (
	"context"
	"strings"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
)

// outputPrefix starts the lines a step emits structured output with; in a
// consumer job of an event source each one is an event.
const outputPrefix = "OUTPUT:"

// Emitter takes an event source's events; *engine.Engine implements it.
type Emitter interface {
	Emit(ctx context.Context, jobID, step, run string, ems []engine.Emission) (accepted int, wait <-chan struct{}, err error)
}

// deliverPush writes a push's lines with write, in order; when some are
// `OUTPUT: ` lines of stdout, it first offers them to the engine as events
// (engine.Emit: a consumer job's lines create target jobs, exactly once),
// and writes each prefix of the lines only once the events in it are
// accepted. While the trigger has max_in_flight target jobs in flight it
// waits for one to end, until ctx ends: the push then fails, and the
// worker, whose journal keeps the lines, pushes them again later. Both
// transports of the worker protocol deliver through it.
func deliverPush(ctx context.Context, eng Emitter, jobID string, push workerproto.LogPush, write func([]workerproto.LogLine) error) error {
	var idx []int
	var ems []engine.Emission
	for i, l := range push.Lines {
		if l.Stream != workerproto.Stdout {
			continue
		}
		rest, ok := strings.CutPrefix(l.Line, outputPrefix)
		if !ok {
			continue
		}
		idx = append(idx, i)
		ems = append(ems, engine.Emission{Seq: l.Seq, JSON: strings.TrimSpace(rest)})
	}
	lines := push.Lines
	start := 0
	for len(ems) > 0 {
		n, wait, err := eng.Emit(ctx, jobID, push.StepName, push.Run, ems)
		if err != nil {
			return err
		}
		if n > 0 {
			upto := idx[n-1] + 1
			if err := write(lines[start:upto]); err != nil {
				return err
			}
			start = upto
		}
		ems, idx = ems[n:], idx[n:]
		if len(ems) == 0 {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if start < len(lines) {
		return write(lines[start:])
	}
	return nil
}
