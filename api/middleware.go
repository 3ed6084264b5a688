package api

import (
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/docker/go-units"
	"github.com/labstack/echo/v4"
)

// recoverPanics turns a handler panic into a 500 through the error
// handler, so one bad request never takes the server down.
func (s *server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "method", c.Request().Method, "path", c.Request().URL.Path,
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = fmt.Errorf("handler panic: %v", r)
			}
		}()
		return next(c)
	}
}

// limitHeaders answers 431 to a request whose line and headers pass
// MaxHeaderBytes. The http.Server reads up to a higher hard cap so that
// this JSON answer, not net/http's plain-text one, is what a client
// normally sees.
func (s *server) limitHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if n := headerBytes(c.Request()); n > s.cfg.MaxHeaderBytes {
			return echo.NewHTTPError(http.StatusRequestHeaderFieldsTooLarge,
				fmt.Sprintf("request headers too large: %d bytes (limit %s)", n, units.BytesSize(float64(s.cfg.MaxHeaderBytes))))
		}
		return next(c)
	}
}

// headerBytes is about what the request line and headers took on the
// wire, counted the way net/http counts MaxHeaderBytes.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + len("  \r\n")
	n += len("Host: \r\n") + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}

// limitBody refuses bodies over the request body limit: at once when
// Content-Length says so, otherwise when reading passes it (see readBody).
func (s *server) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > s.cfg.MaxRequestBody {
			return httpx.BodyTooLarge(s.cfg.MaxRequestBody)
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, s.cfg.MaxRequestBody)
		return next(c)
	}
}

// bodyDeadline gives a request body BodyReadTimeout to arrive, so a client
// trickling a body cannot hold a connection and a handler forever. The
// deadline is per request rather than the server's ReadTimeout, and it is
// lifted once the body is read: a read deadline left on the connection
// would end long-polls (net/http cancels a request whose connection read
// fails) and would outlive a WebSocket hijack. Requests without a body
// (GETs, streams, log downloads) never get one.
func (s *server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		rc := http.NewResponseController(c.Response())
		if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err != nil {
			// Not a net/http connection (a test recorder): nothing to bound.
			return next(c)
		}
		req.Body = &deadlineBody{ReadCloser: req.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		return next(c)
	}
}

// deadlineBody lifts the read deadline when the body ends (or fails).
type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

// publicRoutes are the API's own /api routes that need no token even with
// auth on; auth.Public names auth's.
var publicRoutes = map[string]bool{
	"/api/config":       true,
	"/api/openapi.json": true,
}

// streamRoute (and eventsRoute) may carry its token as ?token=, since
// browsers cannot set headers on a WebSocket or an EventSource.
const streamRoute = "/api/jobs/:id/logs/stream"

// authenticate requires a user (auth.Service.RequireUser) on /api routes
// other than the public ones, and on /mcp, when auth is on, and a key
// scope the route allows (requireScope). /worker and /hooks keep their
// own credentials.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	if s.auth == nil {
		return next
	}
	requireUser := s.auth.RequireUser(streamRoute, eventsRoute)(requireScope(next))
	return func(c echo.Context) error {
		path := c.Request().URL.Path
		if (!underAPI(path) && !underMCP(path)) || publicRoutes[c.Path()] || auth.Public(c.Path()) {
			return next(c)
		}
		return requireUser(c)
	}
}
