package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/runners/worker"
)

// TestInProcessTransportEnforcesTheHolderRules forges, through the
// in-process adapter, the reports the HTTP tests forge: the same engine
// rules refuse them, and nothing changes.
func TestInProcessTransportEnforcesTheHolderRules(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  two:
    flow:
      held: {type: script, script: "true"}
      gpu: {type: script, script: "true", tags: [gpu]}
`)
	ctx := t.Context()
	srv := f.srv.inProcessTransport(50 * time.Millisecond) // the intruder's claim finds no work: not a minute's wait
	holder, err := srv.Register(ctx, "holder", nil)
	if err != nil {
		t.Fatal(err)
	}
	intruder, err := srv.Register(ctx, "intruder", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := f.execute("main", "two", nil)

	// Tags named in the claim are not the worker's: the gpu step stays ready.
	a, err := srv.Claim(ctx, holder, []string{"gpu"})
	if err != nil || a == nil || a.StepName != "held" {
		t.Fatalf("claim = %+v, %v; want the untagged step", a, err)
	}
	if a, err := srv.Claim(ctx, intruder, []string{"gpu"}); err != nil || a != nil {
		t.Fatalf("claim naming gpu by a worker without it = %+v, %v; want no work", a, err)
	}

	line := []worker.LogLine{{Stream: "stdout", Line: "forged"}}
	for _, fg := range []struct {
		name   string
		worker string
		want   error
	}{
		{"another worker", intruder, worker.ErrConflict},
		{"no worker", "", worker.ErrInvalid},
		{"an unknown worker", "00000000-0000-4000-8000-00000000dead", worker.ErrNotFound},
	} {
		t.Run(fg.name, func(t *testing.T) {
			if err := srv.Start(ctx, fg.worker, id, "held"); !errors.Is(err, fg.want) {
				t.Errorf("start = %v, want %v", err, fg.want)
			}
			if _, err := srv.PushLogs(ctx, id, worker.LogPush{WorkerID: fg.worker, StepName: "held", Lines: line}); !errors.Is(err, fg.want) {
				t.Errorf("log push = %v, want %v", err, fg.want)
			}
			res := worker.Result{ExitCode: 1, Output: map[string]any{"forged": true}}
			if err := srv.Complete(ctx, fg.worker, id, "held", res); !errors.Is(err, fg.want) {
				t.Errorf("complete = %v, want %v", err, fg.want)
			}
		})
	}
	// An in-process claim starts its step (engine.StartStepApplied): the
	// step is as the holder's claim left it.
	if s := f.job(id).step("held"); s.Status != "running" || s.StartedAt == nil || s.WorkerID == nil || *s.WorkerID != holder || s.Output != nil {
		t.Fatalf("after forged reports: %+v, want it running, held by the holder as its claim left it", s)
	}
	if logs := f.logs(id, "held"); strings.Contains(logs, "forged") {
		t.Fatalf("log has a forged line: %q", logs)
	}

	// The holder's own reports go through; after its completion a late
	// push is refused.
	if err := srv.Start(ctx, holder, id, "held"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PushLogs(ctx, id, worker.LogPush{WorkerID: holder, StepName: "held", Lines: []worker.LogLine{{Stream: "stdout", Line: "real"}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Complete(ctx, holder, id, "held", worker.Result{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.PushLogs(ctx, id, worker.LogPush{WorkerID: holder, StepName: "held", Lines: line}); !errors.Is(err, worker.ErrConflict) {
		t.Fatalf("push after completion = %v, want a conflict", err)
	}
	if logs := f.logs(id, "held"); !strings.Contains(logs, "real") || strings.Contains(logs, "forged") {
		t.Fatalf("log = %q, want the holder's line only", logs)
	}
	if err := f.srv.engine.CancelJob(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}
