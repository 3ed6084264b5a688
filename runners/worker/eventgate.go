package worker

import (
	"context"
	"strings"
	"sync"

	"github.com/appliance-sh/appliance/runners"
)

// maxUnackedEvents is how many events of a consumer step may wait for the
// server: past it the worker stops reading the step's stdout, its pipe
// fills and the consumer blocks on its writes, so an event source that
// emits faster than its trigger's max_in_flight jobs run is held back at
// the source, nothing dropped and nothing piling up.
const maxUnackedEvents = 64

// eventGate is the journal of a consumer step (Assignment.EventSource):
// every `OUTPUT: ` line of stdout is an event, and Log waits while
// maxUnackedEvents of them are not acknowledged by the server, which for
// an event source means their jobs are created (or they are refused).
type eventGate struct {
	journal
	limit int

	mu      sync.Mutex
	logged  int64 // events logged
	acked   int64 // events the server has
	done    bool  // removed: nobody acknowledges any more
	freed   signal
	emitted signal // an event waits for delivery: push now
}

func newEventGate(j journal, limit int) *eventGate {
	return &eventGate{journal: j, limit: limit}
}

func isEvent(stream, line string) bool {
	return stream == runners.Stdout && strings.HasPrefix(line, runners.OutputPrefix)
}

func (g *eventGate) Log(ctx context.Context, stream, line string) {
	if isEvent(stream, line) {
		g.mu.Lock()
		for !g.done && g.logged-g.acked >= int64(g.limit) {
			freed := g.freed.next()
			g.mu.Unlock()
			g.emitted.fire()
			select {
			case <-freed:
			case <-ctx.Done():
			}
			g.mu.Lock()
			if ctx.Err() != nil {
				break
			}
		}
		g.logged++
		g.mu.Unlock()
		defer g.emitted.fire()
	}
	g.journal.Log(ctx, stream, line)
}

func (g *eventGate) Ack(b batch) error {
	if err := g.journal.Ack(b); err != nil {
		return err
	}
	var n int64
	for _, l := range b.Lines {
		if isEvent(l.Stream, l.Line) {
			n++
		}
	}
	if n > 0 {
		g.mu.Lock()
		g.acked += n
		g.mu.Unlock()
		g.freed.fire()
	}
	return nil
}

func (g *eventGate) Remove() {
	g.journal.Remove()
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
	g.freed.fire()
}

// Emitted is closed when an event next waits for delivery.
func (g *eventGate) Emitted() <-chan struct{} { return g.emitted.next() }
