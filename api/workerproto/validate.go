package workerproto

import (
	"strings"

	"github.com/google/uuid"
)

// Bounds of a log push, above anything a worker of ours sends (it pushes
// at most 5,000 lines of 4 MiB in all, and splits lines at 64 KiB; a
// pod's are at most 1 MiB): an HTTP body is bounded by the server's
// request limit too, an in-process push only by these.
const (
	MaxPushLines = 10_000
	MaxLineBytes = 2 << 20
)

// Every report names its worker. The engine holds the same rule, so a
// report that skipped validation is refused all the same.
func requireWorker(id string) error {
	if id == "" {
		return Errorf(ErrInvalid, "worker_id is required: a worker reports only steps it holds")
	}
	return nil
}

// CheckJobID refuses an id that is not a UUID: it names no job, so it is
// not found without asking the engine.
func CheckJobID(id string) error {
	if len(id) != 36 {
		return Errorf(ErrNotFound, "job %q: not found", id)
	}
	if _, err := uuid.Parse(id); err != nil {
		return Errorf(ErrNotFound, "job %q: not found", id)
	}
	return nil
}

// Validate checks a registration: it needs a name.
func (r Register) Validate() error {
	if strings.TrimSpace(r.Name) == "" {
		return Errorf(ErrInvalid, "name is required")
	}
	return nil
}

// Validate checks a heartbeat: it names its worker.
func (r Heartbeat) Validate() error { return requireWorker(r.WorkerID) }

// Validate checks a claim: it names its worker.
func (r Claim) Validate() error { return requireWorker(r.WorkerID) }

// MaxClaims bounds the steps one claim of several takes.
const MaxClaims = 64

// Validate checks a claim of several: it names its worker and asks for
// at most MaxClaims steps.
func (r Claims) Validate() error {
	if err := requireWorker(r.WorkerID); err != nil {
		return err
	}
	if r.Max < 0 || r.Max > MaxClaims {
		return Errorf(ErrInvalid, "max: want 1 to %d steps, got %d", MaxClaims, r.Max)
	}
	if len(r.Results) > MaxReports {
		return Errorf(ErrInvalid, "results: at most %d in a claim, got %d", MaxReports, len(r.Results))
	}
	return nil
}

// MaxReports bounds the results one Reports carries.
const MaxReports = 64

// Validate checks a batch of reports: at least one, at most MaxReports
// (each is checked on its own, and refused alone).
func (r Reports) Validate() error {
	if len(r.Results) == 0 || len(r.Results) > MaxReports {
		return Errorf(ErrInvalid, "results: want 1 to %d reports, got %d", MaxReports, len(r.Results))
	}
	return nil
}

// Validate checks a local job's creation: its worker, workspace and task.
func (r LocalJob) Validate() error {
	switch {
	case strings.TrimSpace(r.Workspace) == "":
		return Errorf(ErrInvalid, "workspace is required")
	case strings.TrimSpace(r.Task) == "":
		return Errorf(ErrInvalid, "task is required")
	}
	return requireWorker(r.WorkerID)
}

// Validate checks a local job's end: it names the holder.
func (r JobDone) Validate() error {
	if r.WorkerID == "" {
		return Errorf(ErrInvalid, "worker_id is required: only the worker holding a local job completes it")
	}
	return nil
}

// Validate checks a start or token request: it names its worker.
func (r WorkerRef) Validate() error { return requireWorker(r.WorkerID) }

// Validate checks a step's result: it names its worker.
func (r Result) Validate() error { return requireWorker(r.WorkerID) }

// Validate checks a log push: its step, its lines' streams, numbers and
// sizes, then its worker.
func (r LogPush) Validate() error {
	if r.StepName == "" {
		return Errorf(ErrInvalid, "step_name is required")
	}
	if len(r.Lines) > MaxPushLines {
		return Errorf(ErrInvalid, "lines: %d lines in one push, at most %d: push them in parts", len(r.Lines), MaxPushLines)
	}
	for i, l := range r.Lines {
		if l.Stream != Stdout && l.Stream != Stderr {
			return Errorf(ErrInvalid, "lines[%d].stream must be stdout or stderr, got %q", i, l.Stream)
		}
		if l.Seq < 0 {
			return Errorf(ErrInvalid, "lines[%d].seq must not be negative, got %d", i, l.Seq)
		}
		if len(l.Line) > MaxLineBytes {
			return Errorf(ErrInvalid, "lines[%d].line is %d bytes, at most %d: split it", i, len(l.Line), MaxLineBytes)
		}
	}
	return requireWorker(r.WorkerID)
}
