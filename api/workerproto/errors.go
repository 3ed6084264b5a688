package workerproto

import (
	"errors"
	"fmt"
)

// The kinds of refusal of the worker protocol, whatever the transport:
// the HTTP transport answers each with its status (in brackets), and a
// worker tells them apart with errors.Is.
var (
	// ErrInvalid: the report is malformed (400); sending it again cannot help.
	ErrInvalid = errors.New("invalid report")
	// ErrUnknownWorker: the server does not know this worker id (it was
	// forgotten or never registered); the worker registers again (404 on
	// heartbeat and claim).
	ErrUnknownWorker = errors.New("unknown worker")
	// ErrConflict: the server refused a report because the step is no longer
	// this worker's to report (recovered, cancelled or already complete) (409).
	ErrConflict = errors.New("conflict")
	// ErrNotFound: the worker, job, step or workspace named does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrBusy: the report cannot be taken yet (an event source's
	// max_in_flight is full); the worker sends it again later (503).
	ErrBusy = errors.New("busy")
	// ErrUnauthorized: the server rejected the worker token; retrying
	// cannot help (401, HTTP only).
	ErrUnauthorized = errors.New("worker token rejected by server")
	// ErrForbidden: the report names a worker the caller did not prove it
	// is (its secret missing or wrong, or an in-process worker named over
	// HTTP); retrying cannot help (403, HTTP only).
	ErrForbidden = errors.New("not this worker's report")
)

// refusal is a refusal of a given kind. Its message is what the worker is
// told, without the kind's name, so both transports word it alike; the
// cause (an engine error) stays in the chain for whoever maps it.
type refusal struct {
	kind  error
	msg   string
	cause error
}

func (e *refusal) Error() string { return e.msg }

func (e *refusal) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// Errorf is a refusal of kind (one of the sentinels above) saying what
// the format says.
func Errorf(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// Refuse gives err the kind of refusal it is, keeping its message and
// its chain.
func Refuse(kind, err error) error {
	return &refusal{kind: kind, msg: err.Error(), cause: err}
}
