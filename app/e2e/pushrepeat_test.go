package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners/worker"
)

func TestRepeatedPushToARestartedServerWritesNoLineTwice(t *testing.T) {
	repeatedPushToARestartedServerWritesNoLineTwice(t)
}

// repeatedPushToARestartedServerWritesNoLineTwice is a remote worker whose
// push was stored by a server that went away before answering: it pushes
// the same numbered lines again, with new ones, to the restarted server,
// and the step's log holds each line once, its secret still masked.
func repeatedPushToARestartedServerWritesNoLineTwice(t *testing.T, storage ...func(*config.Server)) {
	ws := t.TempDir()
	writeWorkspace(t, ws, `
tasks:
  one:
    input:
      pin: {type: string, secret: true}
    flow:
      held: {type: script, script: "true"}
`)
	r := startRestartable(t, map[string]string{"main": ws}, append(storage, func(c *config.Server) {
		c.WorkerToken = workerToken
	})...)
	f := r.fixture()
	ctx := t.Context()
	c := worker.NewClient(r.url, workerToken, nil, worker.WithWorkspaceCache(t.TempDir()))
	id, err := c.Register(ctx, "pusher", nil)
	if err != nil {
		t.Fatal(err)
	}
	job := f.execute("main", "one", map[string]any{"pin": "pin-4242"})
	if a, err := c.Claim(ctx, id, nil); err != nil || a == nil || a.JobID != job {
		t.Fatalf("claim = %+v, %v; want the step of job %s", a, err, job)
	}
	if err := c.Start(ctx, id, job, "held"); err != nil {
		t.Fatal(err)
	}
	push := func(from, to int64) {
		t.Helper()
		p := workerproto.LogPush{WorkerID: id, StepName: "held", Run: "run-1"}
		for seq := from; seq <= to; seq++ {
			p.Lines = append(p.Lines, workerproto.LogLine{Seq: seq, Stream: "stdout", Line: fmt.Sprintf("line %d pin-4242", seq)})
		}
		if _, err := c.PushLogs(ctx, job, p); err != nil {
			t.Fatalf("push of lines %d-%d: %v", from, to, err)
		}
	}
	push(1, 3)
	r.stop() // its answer lost with the server, as far as the worker knows
	r.start()
	f = r.fixture()
	push(1, 5)
	if err := c.Complete(ctx, id, job, "held", workerproto.Result{}); err != nil {
		t.Fatal(err)
	}
	f.waitTerminal(job)

	var got []string
	for _, l := range logLines(t, f.logs(job, "held")) {
		got = append(got, l.Line)
	}
	want := []string{"line 1 ***", "line 2 ***", "line 3 ***", "line 4 ***", "line 5 ***"}
	if !slices.Equal(got, want) {
		t.Fatalf("the step's log after a repeated push to a restarted server:\n got  %q\n want %q", got, want)
	}
}
