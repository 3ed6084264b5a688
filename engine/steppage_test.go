package engine_test

import (
	"maps"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// TestStepQueriesFallBackOnStepsWithAStoreWithoutPager: MemStore has no
// StepPager, so HasStep and StepSummary read the job's steps and answer as
// the bbolt store does from its keys and counters.
func TestStepQueriesFallBackOnStepsWithAStoreWithoutPager(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	job := f.Execute("t", nil)
	f.RunJobStep(job, "a", enginetest.Ok(nil))
	ctx := t.Context()
	for name, want := range map[string]bool{"a": true, "b": true, "": false, "c": false, "_server": false} {
		if got, err := f.Engine.HasStep(ctx, job, name); err != nil || got != want {
			t.Errorf("HasStep(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	want := map[string]int{engine.StepCompleted: 1, engine.StepReady: 1}
	if got, err := f.Engine.StepSummary(ctx, job); err != nil || !maps.Equal(got, want) {
		t.Errorf("StepSummary = %v, %v; want %v", got, err, want)
	}
}
