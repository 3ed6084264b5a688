package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// A step its worker hands back (the in-process pool stopping at its drain
// deadline) is ready again on the same attempt, spending no retry, and
// its timeout no longer runs; it survives a restart as ready and runs
// from the start, and a _server line says why. A plain step and a
// for_each instance alike.
func TestHandedBackStepIsReadyAgainAndRunsAfterARestart(t *testing.T) {
	cases := []struct {
		name, yaml, step string
		rest             []string // steps run after it to end the job
	}{
		{"plain step", flowYAML(`
long: {action: ok, timeout: 30s}
after: {action: ok, depends_on: [long]}`), "long", []string{"after"}},
		{"for_each instance", fanYAML(`["a", "b"]`), "fan[0]", []string{"fan[1]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := enginetest.New(t, tc.yaml)
			job := f.Execute("t", nil)
			claimAndStart(t, f, job, tc.step)
			const reason = "the server shut down and the step did not end within drain_timeout (1s)"
			if err := f.Engine.HandBackStep(t.Context(), f.Worker, job, tc.step, reason); err != nil {
				t.Fatalf("hand back: %v", err)
			}
			s := f.Step(job, tc.step)
			if s.Status != engine.StepReady || s.WorkerID != nil || s.StartedAt != nil || s.AttemptNumber() != 1 {
				t.Fatalf("handed back step: status %s, worker %v, started %v, attempt %d; want ready, unheld, unstarted, attempt 1",
					s.Status, s.WorkerID, s.StartedAt, s.AttemptNumber())
			}
			want := `step "` + tc.step + `" interrupted: ` + reason
			if lines := f.Logs.ServerLines(job); len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], want) {
				t.Fatalf("_server lines %q, want the last to begin %q", lines, want)
			}
			// Its timeout went with its run: nothing fails it while it waits.
			f.Clock.Advance(time.Minute)
			if st := f.Step(job, tc.step).Status; st != engine.StepReady {
				t.Fatalf("a minute after the hand-back the step is %s, want ready", st)
			}

			f.Restart()
			if st := f.Step(job, tc.step).Status; st != engine.StepReady {
				t.Fatalf("after a restart the step is %s, want ready", st)
			}
			f.RunJobStep(job, tc.step, enginetest.Ok(nil))
			for _, name := range tc.rest {
				f.RunJobStep(job, name, enginetest.Ok(nil))
			}
			f.WaitStatus(job, engine.JobCompleted)
		})
	}
}

// Only the step's holder hands it back, and only while it runs.
func TestHandBackIsRefusedUnlessTheWorkerHoldsTheRunningStep(t *testing.T) {
	f := enginetest.New(t, flowYAML(`long: {action: ok}`))
	job := f.Execute("t", nil)
	if err := f.Engine.HandBackStep(t.Context(), f.Worker, job, "long", "x"); !errorsIs(err, engine.ErrConflict) {
		t.Fatalf("hand back of a ready step: %v, want a conflict", err)
	}
	claimAndStart(t, f, job, "long")
	other := f.Register("other", f.WorkerTags, true)
	if err := f.Engine.HandBackStep(t.Context(), other, job, "long", "x"); !errorsIs(err, engine.ErrConflict) {
		t.Fatalf("hand back by another worker: %v, want a conflict", err)
	}
	if st := f.Step(job, "long").Status; st != engine.StepRunning {
		t.Fatalf("after refused hand-backs the step is %s, want running", st)
	}
}
