package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/runners/worker"
)

// transportWorld is one transport's side of TestBothTransportsAnswerEveryReportAlike:
// its own workers and job on the shared server, so both sides go through
// the same states.
type transportWorld struct {
	name     string
	srv      worker.Server
	holder   string // holds the job's step "held"
	intruder string // holds nothing
	job      string
	claimed  *workerproto.Assignment
}

// normalize replaces the world's own ids in s, so both worlds' answers
// read alike.
func (w *transportWorld) normalize(s string) string {
	return strings.NewReplacer(w.job, "<job>", w.holder, "<holder>", w.intruder, "<intruder>").Replace(s)
}

// refusalKinds are the protocol's kinds of refusal, by name.
var refusalKinds = []struct {
	name string
	err  error
}{
	{"invalid", workerproto.ErrInvalid},
	{"unknown worker", workerproto.ErrUnknownWorker},
	{"not found", workerproto.ErrNotFound},
	{"conflict", workerproto.ErrConflict},
	{"busy", workerproto.ErrBusy},
	{"unauthorized", workerproto.ErrUnauthorized},
}

// outcome is what a transport answered to one report, ids normalized: the
// answer, or the kind of refusal and the message the worker is told
// (the body's error over HTTP, the error's text in process).
type outcome struct {
	answer string
	kind   string
	msg    string
}

func outcomeOf(w *transportWorld, answer any, err error) outcome {
	if err == nil {
		raw, err := json.Marshal(answer)
		if err != nil {
			return outcome{kind: "unencodable answer", msg: err.Error()}
		}
		return outcome{answer: w.normalize(string(raw))}
	}
	o := outcome{kind: "other", msg: err.Error()}
	for _, k := range refusalKinds {
		if errors.Is(err, k.err) {
			o.kind = k.name
			break
		}
	}
	var se *worker.StatusError
	if errors.As(err, &se) {
		o.msg = se.Message
	}
	o.msg = w.normalize(o.msg)
	return o
}

// TestBothTransportsAnswerEveryReportAlike sends every kind of worker
// report, valid and refused, through the HTTP transport (the worker's
// client against a real server on 127.0.0.1 over bbolt) and through the
// in-process adapter onto the same server's engine, and compares the
// answers and the refusals' kinds and messages.
func TestBothTransportsAnswerEveryReportAlike(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  two:
    flow:
      held: {type: script, script: "true"}
      other: {type: script, script: "true", tags: [gpu]}
`)
	ctx := t.Context()
	const (
		ghost      = "00000000-0000-4000-8000-00000000dead"
		unknownJob = "00000000-0000-4000-8000-0000000b0b0b"
	)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	line := func(seq int64, stream, text string) workerproto.LogLine {
		return workerproto.LogLine{Seq: seq, TS: ts, Stream: stream, Line: text}
	}

	worlds := []*transportWorld{
		{name: "http", srv: worker.NewClient(f.url, workerToken, nil, worker.WithWorkspaceCache(t.TempDir()))},
		{name: "in-process", srv: f.srv.inProcessTransport(0)},
	}
	for _, w := range worlds {
		var err error
		if w.holder, err = w.srv.Register(ctx, "holder-"+w.name, nil); err != nil {
			t.Fatalf("%s: register: %v", w.name, err)
		}
		if w.intruder, err = w.srv.Register(ctx, "intruder-"+w.name, nil); err != nil {
			t.Fatalf("%s: register: %v", w.name, err)
		}
		w.job = f.execute("main", "two", nil)
		// A valid claim: the untagged step of the world's own job (the
		// other world's is held already, and neither worker has gpu).
		if w.claimed, err = w.srv.Claim(ctx, w.holder, []string{"gpu"}); err != nil || w.claimed == nil {
			t.Fatalf("%s: claim = %+v, %v; want the step held", w.name, w.claimed, err)
		}
	}
	if a, b := outcomeOf(worlds[0], *worlds[0].claimed, nil), outcomeOf(worlds[1], *worlds[1].claimed, nil); a != b || worlds[0].claimed.StepName != "held" {
		t.Fatalf("claims differ or claimed the wrong step:\n http:       %+v\n in-process: %+v", a, b)
	}

	type call func(ctx context.Context, w *transportWorld) (any, error)
	push := func(worker func(*transportWorld) string, job func(*transportWorld) string, p workerproto.LogPush) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			p.WorkerID = worker(w)
			return w.srv.PushLogs(ctx, job(w), p)
		}
	}
	holder := func(w *transportWorld) string { return w.holder }
	intruder := func(w *transportWorld) string { return w.intruder }
	nobody := func(*transportWorld) string { return "" }
	stranger := func(*transportWorld) string { return ghost }
	ownJob := func(w *transportWorld) string { return w.job }
	noJob := func(*transportWorld) string { return unknownJob }
	badJob := func(*transportWorld) string { return "nope" }
	start := func(worker, job func(*transportWorld) string, step string) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			return "ok", w.srv.Start(ctx, worker(w), job(w), step)
		}
	}
	complete := func(worker, job func(*transportWorld) string, step string) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			return "ok", w.srv.Complete(ctx, worker(w), job(w), step, workerproto.Result{Output: map[string]any{"n": 1}})
		}
	}
	heartbeat := func(worker func(*transportWorld) string) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			return "ok", w.srv.Heartbeat(ctx, worker(w), []workerproto.StepRef{{JobID: w.job, Step: "held"}})
		}
	}
	claim := func(worker func(*transportWorld) string) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			return w.srv.Claim(ctx, worker(w), nil)
		}
	}
	stepToken := func(worker func(*transportWorld) string, step string) call {
		return func(ctx context.Context, w *transportWorld) (any, error) {
			tok, err := w.srv.StepToken(ctx, worker(w), w.job, step)
			return strings.HasPrefix(tok, "apst_"), err
		}
	}
	heldLog := func(ctx context.Context, w *transportWorld) (any, error) {
		return f.logs(w.job, "held"), nil
	}
	lines := func(ls ...workerproto.LogLine) workerproto.LogPush {
		return workerproto.LogPush{StepName: "held", Lines: ls}
	}
	numbered := workerproto.LogPush{StepName: "held", Run: "run-1", Lines: []workerproto.LogLine{line(1, "stdout", "one"), line(2, "stderr", "two")}}
	repeated := workerproto.LogPush{StepName: "held", Run: "run-1", Lines: []workerproto.LogLine{line(1, "stdout", "one"), line(2, "stderr", "two"), line(3, "stdout", "three")}}

	// In order: each report sees the state the ones before it left.
	cases := []struct {
		name string
		kind string // "" = answered
		msg  string // in the refusal's message
		call call
	}{
		{"register: no name", "invalid", "name is required", func(ctx context.Context, w *transportWorld) (any, error) {
			return w.srv.Register(ctx, " ", nil)
		}},
		{"register: valid", "", "", func(ctx context.Context, w *transportWorld) (any, error) {
			id, err := w.srv.Register(ctx, "third-"+w.name, []string{"x"})
			return len(id) == 36, err
		}},
		{"heartbeat: valid", "", "", heartbeat(holder)},
		{"heartbeat: no worker_id", "invalid", "worker_id is required", heartbeat(nobody)},
		{"heartbeat: unknown worker", "unknown worker", ghost, heartbeat(stranger)},
		{"claim: no worker_id", "invalid", "worker_id is required", claim(nobody)},
		{"claim: unknown worker", "unknown worker", ghost, claim(stranger)},

		{"start: no worker_id", "invalid", "worker_id is required", start(nobody, ownJob, "held")},
		{"start: wrong holder", "conflict", "held by another worker", start(intruder, ownJob, "held")},
		{"start: unknown worker", "not found", ghost, start(stranger, ownJob, "held")},
		{"start: unknown job", "not found", unknownJob, start(holder, noJob, "held")},
		{"start: job id not a uuid", "not found", `job "nope"`, start(holder, badJob, "held")},
		{"start: unknown step", "not found", "", start(holder, ownJob, "ghost-step")},
		{"start: step not running", "conflict", "ready", start(holder, ownJob, "other")},
		{"start: valid", "", "", start(holder, ownJob, "held")},

		{"push: bad stream", "invalid", "lines[1].stream must be stdout or stderr", push(holder, ownJob, lines(line(0, "stdout", "a"), line(0, "stdlog", "b")))},
		{"push: no step_name", "invalid", "step_name is required", push(holder, ownJob, workerproto.LogPush{Lines: []workerproto.LogLine{line(0, "stdout", "a")}})},
		{"push: negative seq", "invalid", "lines[0].seq must not be negative", push(holder, ownJob, workerproto.LogPush{StepName: "held", Run: "r", Lines: []workerproto.LogLine{line(-1, "stdout", "a")}})},
		{"push: line too long", "invalid", "lines[0].line is", push(holder, ownJob, lines(line(0, "stdout", strings.Repeat("x", workerproto.MaxLineBytes+1))))},
		{"push: no worker_id", "invalid", "worker_id is required", push(nobody, ownJob, lines(line(0, "stdout", "forged")))},
		{"push: wrong holder", "conflict", "held by another worker", push(intruder, ownJob, lines(line(0, "stdout", "forged")))},
		{"push: unknown worker", "not found", ghost, push(stranger, ownJob, lines(line(0, "stdout", "forged")))},
		{"push: unknown job", "not found", unknownJob, push(holder, noJob, lines(line(0, "stdout", "forged")))},
		{"push: step not running", "conflict", "ready", push(holder, ownJob, workerproto.LogPush{StepName: "other", Lines: []workerproto.LogLine{line(0, "stdout", "forged")}})},
		{"push: valid numbered", "", "", push(holder, ownJob, numbered)},
		{"push: numbered duplicate", "", "", push(holder, ownJob, repeated)},
		{"push: the log has each numbered line once", "", "", heldLog},

		{"step token: no worker_id", "invalid", "worker_id is required", stepToken(nobody, "held")},
		{"step token: wrong holder", "conflict", "held by another worker", stepToken(intruder, "held")},
		{"step token: step not running", "conflict", "ready", stepToken(holder, "other")},
		{"step token: valid", "", "", stepToken(holder, "held")},

		{"cancelled: valid", "", "", func(ctx context.Context, w *transportWorld) (any, error) {
			return w.srv.Cancelled(ctx, w.job, 0)
		}},
		{"cancelled: unknown job", "not found", unknownJob, func(ctx context.Context, w *transportWorld) (any, error) {
			return w.srv.Cancelled(ctx, unknownJob, 0)
		}},

		{"complete: no worker_id", "invalid", "worker_id is required", complete(nobody, ownJob, "held")},
		{"complete: wrong holder", "conflict", "held by another worker", complete(intruder, ownJob, "held")},
		{"complete: unknown worker", "not found", ghost, complete(stranger, ownJob, "held")},
		{"complete: unknown job", "not found", unknownJob, complete(holder, noJob, "held")},
		{"complete: step not running", "conflict", "ready", complete(holder, ownJob, "other")},
		{"complete: valid", "", "", complete(holder, ownJob, "held")},
		{"complete: again", "conflict", "completed", complete(holder, ownJob, "held")},
		{"push: after completion", "conflict", "completed", push(holder, ownJob, lines(line(0, "stdout", "late")))},
	}
	for _, c := range cases {
		var got []outcome
		for _, w := range worlds {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			answer, err := c.call(cctx, w)
			cancel()
			got = append(got, outcomeOf(w, answer, err))
		}
		http, local := got[0], got[1]
		if http != local {
			t.Errorf("%s: the transports differ:\n http:       %+v\n in-process: %+v", c.name, http, local)
			continue
		}
		if http.kind != c.kind || !strings.Contains(http.msg, c.msg) {
			t.Errorf("%s: both answered %+v, want kind %q with %q in the message", c.name, http, c.kind, c.msg)
		}
	}

	// The duplicate push appended only the line the log lacked.
	for _, w := range worlds {
		log := f.logs(w.job, "held")
		for _, want := range []string{"one", "two", "three"} {
			if n := strings.Count(log, want); n != 1 {
				t.Errorf("%s: %q is %d times in the log, want once:\n%s", w.name, want, n, log)
			}
		}
		if strings.Contains(log, "forged") || strings.Contains(log, "late") {
			t.Errorf("%s: a refused push reached the log:\n%s", w.name, log)
		}
	}
}
