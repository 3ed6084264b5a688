package worker

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Sentinel errors of the worker protocol, whatever the transport: see
// package protocol.
var (
	ErrInvalid       = workerproto.ErrInvalid
	ErrUnknownWorker = workerproto.ErrUnknownWorker
	ErrConflict      = workerproto.ErrConflict
	ErrNotFound      = workerproto.ErrNotFound
	ErrUnauthorized  = workerproto.ErrUnauthorized
	ErrForbidden     = workerproto.ErrForbidden
	// ErrNoClaimsOfSeveral: the server has no POST /worker/claims (it is
	// older than this worker); the slots then claim one step each.
	ErrNoClaimsOfSeveral = errors.New("the server does not hand several steps per claim")
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
	if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid) ||
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

// noRoute reports whether a 404 says the server has no such route (it is
// older than this worker), not that it does not know the worker, job or
// step named: appliance answers an unknown route "no route", a bare
// router "Not Found".
func noRoute(e *StatusError) bool {
	return e.Status == http.StatusNotFound &&
		(strings.Contains(e.Message, "no route") || e.Message == "" || e.Message == http.StatusText(http.StatusNotFound))
}
