package api

import (
	"strings"

	"github.com/labstack/echo/v4"
)

// apiPrefixes are the paths the UI never answers: a mistyped API call gets
// the API's JSON 404, not the UI's page.
var apiPrefixes = []string{"/api", "/worker", "/hooks", "/healthz", "/readyz", "/metrics"}

func isAPIPath(p string) bool {
	for _, prefix := range apiPrefixes {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			return true
		}
	}
	return false
}

// uiRoutes sends every request no other route takes to the UI, which
// answers index.html for any path its own router may know.
func (s *server) uiRoutes(e *echo.Echo) {
	if s.cfg.UI == nil {
		return
	}
	ui := echo.WrapHandler(s.cfg.UI)
	// Any method, so that a POST to an unknown /api path is still a 404
	// rather than the 405 a GET-only catch-all would make it.
	e.Any("/*", func(c echo.Context) error {
		p := c.Request().URL.Path
		if isAPIPath(p) {
			return errNoRoute
		}
		return ui(c)
	})
}
