package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const eventSourceYAML = `
secrets:
  TOKEN: s3cret
tasks:
  produce:
    flow:
      emit:
        type: script
        env: {MODE: action, KEEP: kept}
        script: "true"
  handle:
    input:
      n: {type: integer, required: true}
      origin: {type: string}
    flow:
      ok:
        type: script
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    input: {origin: trigger, n: 0}
    env: {MODE: "event-{{ secret.TOKEN }}"}
    max_in_flight: 2
`

func targets(t *testing.T, f *enginetest.Fixture) []*engine.Job {
	t.Helper()
	jobs, _, err := f.Store.Jobs(context.Background(), engine.JobFilter{Workspace: enginetest.WorkspaceName, TaskName: "handle", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestEmitCreatesTargetJobsOnceWithinMaxInFlight(t *testing.T) {
	f := enginetest.New(t, eventSourceYAML)
	ctx := context.Background()
	source := enginetest.WorkspaceName + "/numbers"
	consumer, err := f.Engine.CreateTriggered(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "produce",
		SourceType: engine.SourceTrigger, SourceID: &source}, "")
	if err != nil {
		t.Fatal(err)
	}
	c := f.ClaimJobStep(consumer.ID, "emit")
	if !c.EventSource {
		t.Fatal("the consumer's claim does not say event_source")
	}
	if err := f.Engine.StartStep(ctx, f.Worker, consumer.ID, "emit"); err != nil {
		t.Fatal(err)
	}
	env := c.Spec.Env
	if env["MODE"] != "event-s3cret" || env["KEEP"] != "kept" || env[engine.EventOffsetEnv] != "0" {
		t.Fatalf("consumer env %v: want the trigger's MODE (rendered) over the action's, KEEP, and offset 0", env)
	}

	ems := []engine.Emission{{Seq: 1, JSON: `{"n": 1}`}, {Seq: 2, JSON: `{"n": 2}`}, {Seq: 3, JSON: `{not json`}, {Seq: 4, JSON: `{"n": 4}`}}
	n, wait, err := f.Engine.Emit(ctx, consumer.ID, "emit", "run-1", ems)
	if err != nil || n != 2 || wait == nil {
		t.Fatalf("first offer: %d accepted, wait %v, %v; want 2 and a wait (max_in_flight 2)", n, wait != nil, err)
	}
	// Offered again (a repeated push): no job twice; the bad line needs no
	// slot, so it is taken now (with a warning), event 4 still waits.
	if n, _, _ := f.Engine.Emit(ctx, consumer.ID, "emit", "run-1", ems); n != 3 || len(targets(t, f)) != 2 {
		t.Fatalf("repeat: %d accepted, %d jobs; want 3 and 2", n, len(targets(t, f)))
	}
	select {
	case <-wait:
		t.Fatal("wait closed while both target jobs run")
	default:
	}
	first := targets(t, f)
	for _, j := range first {
		if j.SourceType != engine.SourceTrigger || *j.SourceID != source || j.Input["origin"] != "trigger" {
			t.Fatalf("target job %+v: want source trigger %s and the trigger's input", j, source)
		}
	}
	f.RunJobStep(first[len(first)-1].ID, "ok", engine.StepResult{})
	<-wait
	// One slot: event 4 takes it.
	n, wait, err = f.Engine.Emit(ctx, consumer.ID, "emit", "run-1", ems)
	if err != nil || n != 4 || wait != nil {
		t.Fatalf("after a target ended: %d accepted, %v; want all 4", n, err)
	}
	if got := len(targets(t, f)); got != 3 {
		t.Fatalf("%d target jobs, want 3 (one event was bad)", got)
	}
	f.Settle()
	warned := strings.Join(f.Logs.ServerLines(consumer.ID), "\n")
	if !strings.Contains(warned, "line 3 not accepted: malformed JSON") {
		t.Fatalf("consumer _server lines lack the bad event's warning:\n%s", warned)
	}
	if got := f.Job(consumer.ID).Status; got != engine.JobRunning {
		t.Fatalf("consumer %s, want still running", got)
	}
}

func TestEmitOfAJobThatIsNoConsumerCreatesNothing(t *testing.T) {
	f := enginetest.New(t, eventSourceYAML)
	id := f.Execute("produce", nil) // by hand: not from the trigger
	if c := f.ClaimStep("emit"); c.EventSource || c.Spec.Env[engine.EventOffsetEnv] != "" {
		t.Fatalf("claim of a job not from the trigger: event_source %v, env %v", c.EventSource, c.Spec.Env)
	}
	n, wait, err := f.Engine.Emit(context.Background(), id, "emit", "r", []engine.Emission{{Seq: 1, JSON: `{"n": 1}`}})
	if err != nil || n != 1 || wait != nil || len(targets(t, f)) != 0 {
		t.Fatalf("emit from a plain job: %d %v %v, %d jobs; want all taken, none created", n, wait != nil, err, len(targets(t, f)))
	}
}

// A target job waiting in its task's line is in flight: max_in_flight
// counts it, so a burst of events cannot pile up behind a limit.
func TestQueuedTargetJobsCountAsInFlight(t *testing.T) {
	f := enginetest.New(t, strings.Replace(eventSourceYAML, "  handle:\n", "  handle:\n    concurrency: {limit: 1}\n", 1))
	ctx := context.Background()
	source := enginetest.WorkspaceName + "/numbers"
	consumer, err := f.Engine.CreateTriggered(ctx, engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "produce",
		SourceType: engine.SourceTrigger, SourceID: &source}, "")
	if err != nil {
		t.Fatal(err)
	}
	f.ClaimJobStep(consumer.ID, "emit")
	if err := f.Engine.StartStep(ctx, f.Worker, consumer.ID, "emit"); err != nil {
		t.Fatal(err)
	}
	ems := []engine.Emission{{Seq: 1, JSON: `{"n": 1}`}, {Seq: 2, JSON: `{"n": 2}`}, {Seq: 3, JSON: `{"n": 3}`}}
	n, wait, err := f.Engine.Emit(ctx, consumer.ID, "emit", "run-1", ems)
	if err != nil || n != 2 || wait == nil {
		t.Fatalf("%d accepted, wait %v, %v; want 2 (one running, one queued) and a wait", n, wait != nil, err)
	}
	queuedTargets := 0
	for _, j := range targets(t, f) {
		if f.Job(j.ID).Queued() {
			queuedTargets++
		}
	}
	if queuedTargets != 1 {
		t.Fatalf("%d target jobs queued, want 1 behind the limit of 1", queuedTargets)
	}
}
