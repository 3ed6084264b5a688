package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// stepPages: a backend that serves big jobs' steps by page
// (engine.StepPager) counts them per status as the records say through
// every change, pages them in Seq order from a position, by status and
// without for_each instances, and finds a step by name.
func stepPages(t *testing.T, b Backend) {
	s := b.Open(t)
	p, ok := s.(engine.StepPager)
	if !ok {
		t.Skip("this backend pages no steps (engine.StepPager): the engine reads the job's steps instead")
	}
	ctx := context.Background()
	j := job("j1", "ops", "build", engine.JobRunning, 0)
	steps := []*engine.Step{step("j1", "prep", 0, engine.StepCompleted), step("j1", "each", 1, engine.StepRunning)}
	for i := range 20 {
		st := step("j1", fmt.Sprintf("each[%d]", i), 2+i, engine.StepReady)
		st.FlowStep, st.Index = "each", i
		steps = append(steps, st)
	}
	steps = append(steps, step("j1", "after", 22, engine.StepPending))
	commit(t, s, &engine.Batch{Jobs: []*engine.Job{j}, Steps: steps})
	checkSummary(t, s, "j1")
	// Half the instances run and end: counts move, and a status no step
	// has any more is not listed.
	for i, st := range steps[2:12] {
		st.Status = []string{engine.StepCompleted, engine.StepFailed}[i%2]
	}
	commit(t, s, &engine.Batch{Steps: steps[2:12]})
	for _, st := range steps[12:22] {
		st.Status = engine.StepRunning
	}
	commit(t, s, &engine.Batch{Steps: steps[12:22]})
	checkSummary(t, s, "j1")
	if got, _ := p.StepSummary(ctx, "j1"); got[engine.StepReady] != 0 {
		if _, listed := got[engine.StepReady]; listed {
			t.Errorf("summary lists %q with no step in it: %v", engine.StepReady, got)
		}
	}
	page := func(q engine.StepQuery) []string {
		t.Helper()
		got, err := p.StepsPage(ctx, "j1", q)
		if err != nil {
			t.Fatalf("steps page %+v: %v", q, err)
		}
		names := []string{}
		for _, st := range got {
			names = append(names, st.Name)
		}
		return names
	}
	for _, tc := range []struct {
		q    engine.StepQuery
		want string
	}{
		{engine.StepQuery{After: -1, Limit: 3}, "[prep each each[0]]"},
		{engine.StepQuery{After: 20, Limit: 5}, "[each[19] after]"},
		{engine.StepQuery{After: -1, Limit: 10, FlowOnly: true}, "[prep each after]"},
		{engine.StepQuery{After: 3, Limit: 3, Statuses: []string{engine.StepFailed, engine.StepCompleted}}, "[each[2] each[3] each[4]]"},
		{engine.StepQuery{After: -1, Limit: 4, Statuses: []string{engine.StepFailed}}, "[each[1] each[3] each[5] each[7]]"},
		{engine.StepQuery{After: -1, Limit: 10, Statuses: []string{engine.StepRunning, engine.StepPending}, FlowOnly: true}, "[each after]"},
	} {
		if got := fmt.Sprint(page(tc.q)); got != tc.want {
			t.Errorf("steps page %+v = %s, want %s", tc.q, got, tc.want)
		}
	}
	for name, want := range map[string]bool{"each[7]": true, "after": true, "each[20]": false, "": false} {
		if got, err := p.HasStep(ctx, "j1", name); err != nil || got != want {
			t.Errorf("HasStep(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	if got, err := p.StepSummary(ctx, "nope"); err != nil || len(got) != 0 {
		t.Errorf("summary of an unknown job: %v, %v", got, err)
	}
}
