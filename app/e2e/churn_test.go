package e2e

import (
	"context"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners"
)

// TestInProcessJobsChurnNoGoroutinesNorTimers runs 500 queued one-step
// jobs through the in-process pool with a runner that spawns nothing and
// counts what the process creates meanwhile: orchestration (claim, start,
// completion, commits) and the in-process worker's reporting and
// cancellation watch all run on long-lived goroutines, and a claim that
// finds a step ready arms no timer, so a job costs no goroutine and no
// engine timer (an idle slot's parked claim arms one as it waits).
func TestInProcessJobsChurnNoGoroutinesNorTimers(t *testing.T) {
	dir := t.TempDir()
	writeWorkspace(t, dir, chainWorkspace(1))
	clock := &countingClock{}
	gate := make(chan struct{})
	f := startFixture(t, map[string]string{"bench": dir}, 4, func(c *config.Server) {
		c.Test.Runners = map[string]runners.Runner{"local": gatedRunner{gate}}
		c.Test.EngineClock = clock
	})
	const jobs = 500
	ids := make([]string, jobs)
	for i := range ids {
		j, err := f.srv.engine.CreateJob(context.Background(), engine.CreateJob{Workspace: "bench", Task: "one"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = j.ID
	}
	// Every slot holds a step at the gate; the other jobs wait, ready.
	goroutines, timers := goroutinesCreated(), clock.timers.Load()
	close(gate)
	for _, id := range ids {
		f.waitDone(id)
	}
	goroutines, timers = goroutinesCreated()-goroutines, clock.timers.Load()-timers
	t.Logf("%d jobs: %d goroutines created, %d engine timers armed", jobs, goroutines, timers)
	// The slots park as the queue empties: a timer each, and a handful
	// of goroutines at most (a runtime's, a timer's firing).
	if goroutines > jobs/50 {
		t.Errorf("%d one-step jobs created %d goroutines (%.2f per job); want none per job", jobs, goroutines, float64(goroutines)/jobs)
	}
	if timers > jobs/50 {
		t.Errorf("%d one-step jobs armed %d engine timers (%.2f per job); want none per job", jobs, timers, float64(timers)/jobs)
	}
}

// gatedRunner runs nothing and succeeds once gate is closed.
type gatedRunner struct{ gate <-chan struct{} }

func (r gatedRunner) Run(ctx context.Context, _ *runners.Step) (int, error) {
	select {
	case <-r.gate:
		return 0, nil
	case <-ctx.Done():
		return 1, context.Cause(ctx)
	}
}

// countingClock is the wall clock, counting the timers armed on it.
type countingClock struct{ timers atomic.Int64 }

func (*countingClock) Now() time.Time { return time.Now() }

func (c *countingClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	c.timers.Add(1)
	return time.AfterFunc(d, f)
}

// goroutinesCreated is how many goroutines the process has created.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
