package engine_test

import (
	"errors"
	"testing"

	"github.com/appliance-sh/appliance/engine/enginetest"
)

// claimAndStart claims a step for the fixture's worker and reports its
// start, as a worker does before running it: a claim alone is answered
// from memory and becomes durable with the start report.
func claimAndStart(t testing.TB, f *enginetest.Fixture, job, step string) {
	t.Helper()
	f.ClaimJobStep(job, step)
	if err := f.Engine.StartStep(t.Context(), f.Worker, job, step); err != nil {
		t.Fatalf("start %s: %v", step, err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
