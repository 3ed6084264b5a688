package worker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/runners"
)

func TestEventGateHoldsTheStepBackUntilTheServerHasItsEvents(t *testing.T) {
	j := newMemJournal(runMeta{Run: "r", JobID: "j", Step: "s"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
	g := newEventGate(j, 2)
	emitted := g.Emitted()
	var logged atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 5; i++ {
			g.Log(context.Background(), runners.Stdout, "plain line") // not an event: never held
			g.Log(context.Background(), runners.Stdout, fmt.Sprintf(`OUTPUT: {"n": %d}`, i))
			logged.Add(1)
		}
	}()
	waitCount := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for logged.Load() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%d events logged, want %d", logged.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitCount(2)
	select {
	case <-emitted:
	case <-time.After(5 * time.Second):
		t.Fatal("delivery was not told an event waits")
	}
	// Held: the third event waits while two are not acknowledged.
	time.Sleep(50 * time.Millisecond)
	if n := logged.Load(); n != 2 {
		t.Fatalf("%d events logged with none acknowledged, want the gate to hold at 2", n)
	}
	b, err := g.Pending(1000, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Ack(b); err != nil {
		t.Fatal(err)
	}
	waitCount(4)
	b, _ = g.Pending(1000, 1<<20)
	_ = g.Ack(b)
	<-done
	// Removing the run (its result delivered or refused) releases any writer.
	g2 := newEventGate(newMemJournal(runMeta{}, slog.New(slog.NewTextHandler(io.Discard, nil)), 0), 1)
	g2.Log(context.Background(), runners.Stdout, "OUTPUT: {}")
	released := make(chan struct{})
	go func() { g2.Log(context.Background(), runners.Stdout, "OUTPUT: {}"); close(released) }()
	g2.Remove()
	select {
	case <-released:
	case <-time.After(5 * time.Second):
		t.Fatal("Remove did not release a held writer")
	}
}
