package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
)

// errorBody is every error response: one field, as the interface fixes.
type errorBody struct {
	Error string `json:"error"`
}

// handleError is the one place errors become HTTP statuses: the engine's
// sentinels by kind, echo's own errors by their code, anything else 500
// with a generic message (the details go to the log, not the client).
func (s *server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, msg := s.classify(err)
	// A body read timeout cancels the request too, but the client is
	// still there to be told.
	if c.Request().Context().Err() != nil && status != http.StatusRequestTimeout {
		// The client hung up (a worker ending its long-poll): nobody is
		// left to answer, and it is no server failure.
		s.log.Debug("request abandoned", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		return
	}
	var later *retryLaterError
	if errors.As(err, &later) {
		c.Response().Header().Set("Retry-After", retryAfterSeconds(later.after))
	}
	if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, errorBody{Error: msg})
	}
	if err != nil {
		s.log.Debug("write error response", "err", err)
	}
}

func (s *server) classify(err error) (int, string) {
	var (
		he     *echo.HTTPError
		later  *retryLaterError
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
	case errors.As(err, &later):
		return later.status, later.msg
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

// retryLaterError is a refusal that passes with time (429, 503): it is
// answered with a Retry-After header.
type retryLaterError struct {
	status int
	msg    string
	after  time.Duration
}

func (e *retryLaterError) Error() string { return e.msg }

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up, at
// least 1 (0 would invite an immediate retry that fails again).
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// badRequest is a 400 with a message naming what is wrong.
func badRequest(format string, args ...any) error {
	return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// notFound is a 404 with a message naming the missing thing.
func notFound(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, engine.ErrNotFound)...)
}

// decodeJSON reads a JSON object body into v. An empty body leaves v as
// it is, so endpoints whose fields are all optional accept no body at all.
func decodeJSON(c echo.Context, v any) error {
	body, err := readBody(c.Request())
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return unmarshalJSON(body, v)
}

// readBody reads the whole request body, refusing one over the body limit
// (413) and one that is not valid UTF-8 (400): Go's JSON decoder would
// silently turn the bad bytes into U+FFFD, changing what the caller sent.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, errBodyTooLarge(tooLarge.Limit)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, echo.NewHTTPError(http.StatusRequestTimeout, "request body did not arrive in time")
		}
		return nil, badRequest("read request body: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, badRequest("request body is not valid UTF-8 (first bad byte at offset %d): send UTF-8 text", invalidUTF8At(body))
	}
	return body, nil
}

// invalidUTF8At is the offset of the first byte that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

// unmarshalJSON decodes one JSON value into v, with messages that name the
// field and the kinds involved.
func unmarshalJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badRequest("field %s: expected %s, got JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if errors.As(err, &te) {
			return badRequest("request body must be a JSON object, got JSON %s", te.Value)
		}
		return badRequest("malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("malformed JSON body: unexpected data after the value")
	}
	return nil
}

// jsonKind names a Go kind the way a JSON author thinks of it.
func jsonKind(kind string) string {
	switch kind {
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "ptr", "interface":
		return "a value"
	}
	return "a number"
}

// forbiddenError is a refusal of an authenticated caller (403): not an
// admin, or allowed only to view the task.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

// forbidden is a 403 with a message naming what the caller may not do.
func forbidden(format string, args ...any) error {
	return &forbiddenError{msg: fmt.Sprintf(format, args...)}
}
