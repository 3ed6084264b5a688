package metrics

import (
	"context"
	"net/http/httptest"
	"strings"
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

func TestQueuedJobsAndWaitsArePerQueue(t *testing.T) {
	r := New(func(context.Context) (engine.Stats, error) {
		return engine.Stats{Queued: map[string]int{"deploys": 3, "main/build": 0}}, nil
	})
	r.QueueWaited("deploys", 4*time.Second)
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`appliance_queued_jobs{queue="deploys"} 3`,
		`appliance_queued_jobs{queue="main/build"} 0`,
		`appliance_queue_wait_seconds_sum{queue="deploys"} 4`,
		`appliance_queue_wait_seconds_count{queue="deploys"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
