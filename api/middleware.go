package api

import (
	"fmt"
	"net/http"
	"runtime/debug"

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

// limitBody refuses bodies over maxBody: at once when Content-Length says
// so, otherwise when reading passes the limit (see decodeJSON).
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > maxBody {
			return errBodyTooLarge
		}
		req.Body = http.MaxBytesReader(c.Response(), req.Body, maxBody)
		return next(c)
	}
}

// maxBody bounds every request body, log pushes included.
const maxBody = 10 << 20

var errBodyTooLarge = echo.NewHTTPError(http.StatusRequestEntityTooLarge, "request body too large (limit 10 MiB)")
