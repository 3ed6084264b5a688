package runners

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors of the worker protocol, whatever the transport.
var (
	// ErrUnknownWorker: the server does not know this worker id (it was
	// forgotten or never registered); the worker registers again.
	ErrUnknownWorker = errors.New("unknown worker")
	// ErrConflict: the server refused a report because the step is no longer
	// this worker's to report (recovered, cancelled or already complete).
	ErrConflict = errors.New("conflict")
	// ErrNotFound: the job, step or workspace named does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnauthorized: the server rejected the worker token; retrying cannot help.
	ErrUnauthorized = errors.New("worker token rejected by server")
)

// StatusError is a non-2xx answer of the server: its status and the text of
// its {"error": "..."} body.
type StatusError struct {
	Op      string // what was being done, e.g. "claim"
	Status  int
	Message string
	// sentinel is the protocol error the status means for this operation.
	sentinel error
}

func (e *StatusError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s: server answered %d: %s", e.Op, e.Status, msg)
}

func (e *StatusError) Unwrap() error { return e.sentinel }

// permanent reports whether retrying the call that returned err cannot help:
// the server understood the request and refused it.
func permanent(err error) bool {
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrConflict) ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnknownWorker) {
		return true
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status >= 400 && se.Status < 500 &&
			se.Status != http.StatusRequestTimeout && se.Status != http.StatusTooManyRequests
	}
	return false
}
