package engine_test

import (
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// localFixture has no in-process worker: a holder and a bystander join.
func localFixture(t *testing.T) (f *enginetest.Fixture, holder, other, job string) {
	f = enginetest.NewWith(t, enginetest.LoadWorkspace(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`)), enginetest.Options{NoWorker: true, HeartbeatTimeout: 90 * time.Second})
	holder = f.Register("laptop", nil, false)
	other = f.Register("farm", nil, false)
	j, err := f.Engine.CreateLocalJob(t.Context(), holder, engine.CreateJob{Workspace: "main", Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if j.SourceType != engine.SourceLocal || j.SourceID == nil || *j.SourceID != holder {
		t.Fatalf("local job source %s %v, want local %s", j.SourceType, j.SourceID, holder)
	}
	return f, holder, other, j.ID
}

func TestLocalJobStepsAreClaimedOnlyByItsHolderAcrossARestart(t *testing.T) {
	f, holder, other, job := localFixture(t)
	if c, err := f.Engine.Claim(t.Context(), other, 0); err != nil || c != nil {
		t.Fatalf("another worker's claim got %+v, %v; want nothing", c, err)
	}
	f.Restart()
	if c, err := f.Engine.Claim(t.Context(), other, 0); err != nil || c != nil {
		t.Fatalf("after a restart another worker's claim got %+v, %v; want nothing", c, err)
	}
	if _, err := f.Engine.ClaimJob(t.Context(), other, job, 0); !errorsIs(err, engine.ErrConflict) {
		t.Fatalf("another worker's claim of the job: %v, want ErrConflict", err)
	}
	c, err := f.Engine.ClaimJob(t.Context(), holder, job, 0)
	if err != nil || c == nil || c.StepName != "a" {
		t.Fatalf("holder's claim: %+v, %v", c, err)
	}
	// A parked claim gets b the moment a completes, and learns of the
	// job's end once b completes.
	got := make(chan *engine.Claim, 1)
	go func() {
		c, _ := f.Engine.ClaimJob(t.Context(), holder, job, time.Hour)
		got <- c
	}()
	if err := f.Engine.StartStep(t.Context(), holder, job, "a"); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CompleteStep(t.Context(), holder, job, "a", enginetest.Ok(nil)); err != nil {
		t.Fatal(err)
	}
	if c := <-got; c == nil || c.StepName != "b" {
		t.Fatalf("parked claim got %+v, want b", c)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := f.Engine.ClaimJob(t.Context(), holder, job, time.Hour)
		ended <- err
	}()
	if err := f.Engine.StartStep(t.Context(), holder, job, "b"); err != nil {
		t.Fatal(err)
	}
	if err := f.Engine.CompleteStep(t.Context(), holder, job, "b", enginetest.Ok(map[string]any{"v": 1})); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; !errorsIs(err, engine.ErrConflict) {
		t.Fatalf("parked claim when the job ended: %v, want ErrConflict", err)
	}
	j, err := f.Engine.CompleteJob(t.Context(), holder, job)
	if err != nil || j.Status != engine.JobCompleted {
		t.Fatalf("complete: %+v, %v", j, err)
	}
}

func TestLostLocalWorkerFailsItsJob(t *testing.T) {
	f, holder, _, job := localFixture(t)
	if c, err := f.Engine.ClaimJob(t.Context(), holder, job, 0); err != nil || c == nil {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	if err := f.Engine.StartStep(t.Context(), holder, job, "a"); err != nil {
		t.Fatal(err)
	}
	f.Clock.Advance(91 * time.Second)
	f.WaitStatus(job, engine.JobFailed)
	if s := f.StepStatuses(job); s["a"] != engine.StepFailed || (s["b"] != engine.StepCancelled && s["b"] != engine.StepSkipped) {
		t.Fatalf("steps of a lost local job: %v", s)
	}
}
