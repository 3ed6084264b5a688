package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
)

// handleError is the one place errors become HTTP statuses: the engine's
// sentinels by kind, echo's own errors by their code, anything else 500
// with a generic message (the details go to the log, not the client).
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if isRouteMiss(err) {
		err = routeMiss(c)
	}
	status, msg := s.classify(err)
	if status == http.StatusForbidden {
		s.denied(c, msg)
	}
	// A body read timeout cancels the request too, but the client is
	// still there to be told.
	if c.Request().Context().Err() != nil && status != http.StatusRequestTimeout {
		// The client hung up (a worker ending its long-poll): nobody is
		// left to answer, and it is no server failure.
		s.log.Debug("request abandoned", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		return
	}
	var later *httpx.RetryLater
	if errors.As(err, &later) {
		c.Response().Header().Set("Retry-After", retryAfterSeconds(later.After))
	}
	if errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrDatabaseUnavailable) {
		// A failover is seconds long: the client retries (see ha.go).
		c.Response().Header().Set("Retry-After", "1")
	}
	if status == http.StatusUnauthorized {
		// RFC 6750: a 401 names the scheme the client should use (an MCP
		// client reads it to know a token is wanted).
		c.Response().Header().Set("WWW-Authenticate", "Bearer")
	}
	if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if errors.Is(err, engine.ErrUnavailable) {
		s.log.Warn("request failed: a store did not answer", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, wire.Error{Error: msg})
	}
	if err != nil {
		s.log.Debug("write error response", "err", err)
	}
}

func (s *server) classify(err error) (int, string) {
	var (
		he     *echo.HTTPError
		later  *httpx.RetryLater
		denied *forbiddenError
	)
	switch {
	case errors.Is(err, engine.ErrNotFound),
		errors.Is(err, accounts.ErrUserNotFound),
		errors.Is(err, accounts.ErrAPIKeyNotFound):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, accounts.ErrEmailTaken):
		return http.StatusConflict, "a user with this email already exists"
	case errors.Is(err, accounts.ErrAPIKeyPrefixTaken):
		return http.StatusConflict, err.Error()
	case errors.Is(err, accounts.ErrLastAdmin):
		return http.StatusConflict, "the server must keep at least one admin: make another user admin first"
	case errors.Is(err, accounts.ErrRefreshTokenNotFound):
		return http.StatusUnauthorized, "invalid or expired refresh token"
	case errors.Is(err, accounts.ErrInvalidRecord):
		return http.StatusBadRequest, err.Error()
	case errors.As(err, &denied):
		return http.StatusForbidden, denied.msg
	case errors.Is(err, engine.ErrConflict):
		return http.StatusConflict, err.Error()
	case errors.Is(err, engine.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, engine.ErrStopped):
		return http.StatusServiceUnavailable, "server is shutting down"
	case errors.Is(err, engine.ErrNotLeader):
		return http.StatusServiceUnavailable, "this replica lost the leadership: try again, the new leader will answer"
	case errors.Is(err, engine.ErrDatabaseUnavailable):
		return http.StatusServiceUnavailable, "the database did not answer (restarting?): try again in a few seconds"
	case errors.Is(err, engine.ErrUnavailable):
		// The details (a bucket, an endpoint) go to the log, not the client.
		return http.StatusServiceUnavailable, "the job's log is in the archive, which did not answer: try again later"
	case errors.As(err, &later):
		return later.Status, later.Msg
	// The worker protocol's refusals that no engine error causes (its
	// validation, a busy event source).
	case errors.Is(err, workerproto.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, workerproto.ErrNotFound), errors.Is(err, workerproto.ErrUnknownWorker):
		return http.StatusNotFound, err.Error()
	case errors.Is(err, workerproto.ErrConflict):
		return http.StatusConflict, err.Error()
	case errors.Is(err, workerproto.ErrForbidden):
		return http.StatusForbidden, err.Error()
	case errors.Is(err, workerproto.ErrBusy):
		return http.StatusServiceUnavailable, err.Error()
	case errors.As(err, &he):
		return he.Code, httpErrorMessage(he)
	}
	return http.StatusInternalServerError, "internal server error"
}

// httpErrorMessage words echo's errors (unknown route, wrong method, body
// too large) in our lowercase style; our own HTTPErrors keep their text.
func httpErrorMessage(he *echo.HTTPError) string {
	if msg, ok := he.Message.(string); ok && msg != http.StatusText(he.Code) {
		return msg
	}
	switch he.Code {
	case http.StatusNotFound:
		return "no such endpoint"
	case http.StatusMethodNotAllowed:
		return "method not allowed on this endpoint"
	case http.StatusRequestEntityTooLarge:
		return "request body too large"
	case http.StatusUnauthorized:
		return "missing or invalid token"
	}
	if he.Code >= http.StatusInternalServerError {
		return "internal server error"
	}
	return strings.ToLower(http.StatusText(he.Code))
}

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up, at
// least 1 (0 would invite an immediate retry that fails again).
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// forbiddenError is a refusal of an authenticated caller (403): not an
// admin, or allowed only to view the task.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

// forbidden is a 403 with a message naming what the caller may not do.
func forbidden(format string, args ...any) error {
	return &forbiddenError{msg: fmt.Sprintf(format, args...)}
}
