package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/wire"
)

// An MCP tool is a call of the API's own handler for its route, in
// process: the same decoding, validation, ACL check and masking as the
// HTTP request would get, with no copy of any of them. routeCall builds
// the echo context such a request would have (the route's parameters, the
// /mcp caller's principal) and runs the route's handler (its route-level
// middleware included) into a buffer. The /mcp request itself went
// through the global middleware (Host and Origin checks, body limit,
// authentication); each tool checks its scope (toolScopes).

// maxToolAnswer bounds what one handler may answer a tool (a job detail
// is capped at detailStepCap steps well below it).
const maxToolAnswer = 16 << 20

// toolError is a refusal of a tool call, with the status and message the
// API would have answered.
type toolError struct {
	status int
	msg    string
}

func (e *toolError) Error() string { return e.msg }

// mcpCaller is the caller of one /mcp request.
type mcpCaller struct {
	s *server
	p *auth.Principal // nil with auth off
	// http is the /mcp request's context: a tool call ends with it, and a
	// long one re-checks its credential through it (guardStream).
	http echo.Context
}

// context is an echo context for a request of method to target (a path
// with its query) with body, routed as the server would route it, with
// the caller's principal.
func (m *mcpCaller) context(ctx context.Context, method, target string, body any) (echo.Context, *bufferedResponse, error) {
	var rd *bytes.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(data)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	res := &bufferedResponse{header: http.Header{}}
	c := m.s.echo.NewContext(req, res)
	m.s.echo.Router().Find(method, req.URL.Path, c)
	if m.p != nil {
		auth.SetCaller(c, m.p)
	}
	auth.SetVia(c, audit.SourceMCP, m.http.RealIP())
	return c, res, nil
}

// route calls the handler of method and path (path segments escaped by
// the caller) with query and body, and decodes its answer into out.
func (m *mcpCaller) route(ctx context.Context, method, path string, query url.Values, body, out any) error {
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	c, res, err := m.context(ctx, method, target, body)
	if err != nil {
		return err
	}
	if err := m.run(c, c.Handler()); err != nil {
		return err
	}
	if res.status >= http.StatusBadRequest {
		var e wire.Error
		_ = json.Unmarshal(res.body.Bytes(), &e)
		return &toolError{status: res.status, msg: e.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(res.body.Bytes(), out); err != nil {
		return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
	}
	return nil
}

// run calls h and turns its error into the API's status and message (the
// error mapper's), so a tool says what the API would have said.
func (m *mcpCaller) run(c echo.Context, h echo.HandlerFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			// http.ErrAbortHandler included: a handler that gave up
			// mid-answer has no answer for the tool either.
			m.s.log.Error("panic in a tool's handler", "path", c.Request().URL.Path, "panic", fmt.Sprint(r))
			err = &toolError{status: http.StatusInternalServerError, msg: "internal server error"}
		}
	}()
	if err := h(c); err != nil {
		if isRouteMiss(err) {
			return &toolError{status: http.StatusNotFound, msg: "not found"}
		}
		status, msg := m.s.classify(err)
		if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
			m.s.log.Error("tool call failed", "path", c.Request().URL.Path, "err", err)
		}
		if status == http.StatusForbidden {
			m.s.denied(c, msg) // a tool refused as its route would be: recorded the same
		}
		return &toolError{status: status, msg: msg}
	}
	return nil
}

// errAnswerTooLarge ends a handler's answer past maxToolAnswer.
var errAnswerTooLarge = errors.New("the answer is too large for a tool result: narrow the request")

// bufferedResponse is the http.ResponseWriter a tool's handler writes to.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *bufferedResponse) Header() http.Header { return r.header }

func (r *bufferedResponse) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *bufferedResponse) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(p) > maxToolAnswer {
		return 0, errAnswerTooLarge
	}
	return r.body.Write(p)
}

func (r *bufferedResponse) Flush() {}
