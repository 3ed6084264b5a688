package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// BenchmarkStepObservations is what metrics add to each step in the loop:
// a claim wait and a step end (with its duration).
func BenchmarkStepObservations(b *testing.B) {
	r := New(func(context.Context) (engine.Stats, error) { return engine.Stats{}, nil })
	b.ReportAllocs()
	for b.Loop() {
		r.StepClaimed(3 * time.Millisecond)
		r.StepEnded(engine.StepCompleted, 2*time.Second)
	}
}

func TestStepObservationsDoNotAllocate(t *testing.T) {
	r := New(func(context.Context) (engine.Stats, error) { return engine.Stats{}, nil })
	allocs := testing.AllocsPerRun(1000, func() {
		r.StepClaimed(3 * time.Millisecond)
		r.StepEnded(engine.StepFailed, time.Second)
		r.Committed(8, 20, time.Millisecond)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per step observed, want none", allocs)
	}
}
