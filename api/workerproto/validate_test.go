package workerproto

import (
	"errors"
	"strings"
	"testing"
)

func TestEveryReportIsValidatedWithItsKindAndAMessageNamingTheField(t *testing.T) {
	const worker = "w-1"
	ok := LogLine{Stream: Stdout, Line: "a"}
	for _, c := range []struct {
		name   string
		err    error
		kind   error  // nil = valid
		naming string // in the message
	}{
		{"register", Register{Name: "w"}.Validate(), nil, ""},
		{"register without name", Register{Name: "  "}.Validate(), ErrInvalid, "name is required"},
		{"heartbeat", Heartbeat{WorkerID: worker}.Validate(), nil, ""},
		{"heartbeat without worker", Heartbeat{}.Validate(), ErrInvalid, "worker_id is required"},
		{"claim without worker", Claim{Tags: []string{"gpu"}}.Validate(), ErrInvalid, "worker_id is required"},
		{"start without worker", WorkerRef{}.Validate(), ErrInvalid, "worker_id is required"},
		{"result without worker", Result{ExitCode: 1}.Validate(), ErrInvalid, "worker_id is required"},
		{"push", LogPush{WorkerID: worker, StepName: "s", Lines: []LogLine{ok, {Seq: 3, Stream: Stderr}}}.Validate(), nil, ""},
		{"push without lines", LogPush{WorkerID: worker, StepName: "s"}.Validate(), nil, ""},
		{"push without step", LogPush{WorkerID: worker, Lines: []LogLine{ok}}.Validate(), ErrInvalid, "step_name is required"},
		{"push with a bad stream", LogPush{WorkerID: worker, StepName: "s", Lines: []LogLine{ok, {Stream: "stdlog"}}}.Validate(), ErrInvalid, `lines[1].stream must be stdout or stderr, got "stdlog"`},
		{"push with a negative seq", LogPush{WorkerID: worker, StepName: "s", Lines: []LogLine{{Seq: -2, Stream: Stdout}}}.Validate(), ErrInvalid, "lines[0].seq"},
		{"push of a huge line", LogPush{WorkerID: worker, StepName: "s", Lines: []LogLine{{Stream: Stdout, Line: strings.Repeat("x", MaxLineBytes+1)}}}.Validate(), ErrInvalid, "lines[0].line is"},
		{"push of too many lines", LogPush{WorkerID: worker, StepName: "s", Lines: make([]LogLine, MaxPushLines+1)}.Validate(), ErrInvalid, "at most 10000"},
		{"push without worker", LogPush{StepName: "s", Lines: []LogLine{ok}}.Validate(), ErrInvalid, "worker_id is required"},
		{"job id", CheckJobID("00000000-0000-4000-8000-00000000beef"), nil, ""},
		{"job id not a uuid", CheckJobID("nope"), ErrNotFound, `job "nope": not found`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.kind == nil {
				if c.err != nil {
					t.Fatalf("refused: %v", c.err)
				}
				return
			}
			if !errors.Is(c.err, c.kind) || !strings.Contains(c.err.Error(), c.naming) {
				t.Fatalf("got %v, want %v naming %q", c.err, c.kind, c.naming)
			}
		})
	}
}

func TestARefusalKeepsItsCausesMessageAndChain(t *testing.T) {
	cause := errors.New(`step "x" is completed`)
	err := Refuse(ErrConflict, cause)
	if err.Error() != cause.Error() || !errors.Is(err, ErrConflict) || !errors.Is(err, cause) {
		t.Fatalf("Refuse = %q (conflict %v, cause %v)", err, errors.Is(err, ErrConflict), errors.Is(err, cause))
	}
}
