package api

import (
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
)

// errNoRoute is what the UI's catch-all answers for an API path no route
// takes; the error mapper turns it, like echo's own 404 and 405, into
// routeMiss's answer.
var errNoRoute = errors.New("no route")

// isRouteMiss reports whether err says the router found no handler for the
// request's method and path (rather than a handler saying "not found").
func isRouteMiss(err error) bool {
	return errors.Is(err, errNoRoute) || errors.Is(err, echo.ErrNotFound) || errors.Is(err, echo.ErrMethodNotAllowed)
}

// routeMiss is the answer to a request no route takes: 405 with an Allow
// header when the path is served under other methods, 404 otherwise. It
// reads the routing table, so every route registered on e (/api, /worker,
// /hooks, and any prefix added later) gets it without a list to keep.
func routeMiss(c echo.Context) error {
	r := c.Request()
	if allowed := allowedMethods(c.Echo(), r); len(allowed) > 0 {
		c.Response().Header().Set("Allow", strings.Join(allowed, ", "))
		return echo.NewHTTPError(http.StatusMethodNotAllowed,
			"method not allowed on this endpoint: "+r.Method+" "+r.URL.Path+" (allowed: "+strings.Join(allowed, ", ")+")")
	}
	return httpx.NotFound("no route %s %s", r.Method, r.URL.Path)
}

// allowedMethods are the methods under which a registered route (not the
// UI's catch-all, not a group's not-found route) takes the request's path.
func allowedMethods(e *echo.Echo, r *http.Request) []string {
	routes := map[string]bool{}
	methods := map[string]bool{}
	for _, rt := range e.Routes() {
		if rt.Method == echo.RouteNotFound || rt.Path == "/*" {
			continue
		}
		routes[rt.Method+" "+rt.Path] = true
		methods[rt.Method] = true
	}
	path := echo.GetPath(r)
	var allowed []string
	for m := range methods {
		c := e.NewContext(r, nil)
		e.Router().Find(m, path, c)
		if routes[m+" "+c.Path()] {
			allowed = append(allowed, m)
		}
	}
	sort.Strings(allowed)
	return allowed
}
