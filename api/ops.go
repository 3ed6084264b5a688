package api

import (
	"context"
	"net/http"
	"time"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/wire"
)

// healthTimeout bounds one health or readiness check: a loop or a disk
// that does not answer in this time is as good as down.
const healthTimeout = 2 * time.Second

// opsRoutes serves the operator's endpoints: /healthz and /readyz need no
// credentials (load balancers and kubelets call them); /metrics is open
// with auth off and needs a user token, an API key or the metrics token
// with auth on.
func (s *server) opsRoutes(e *echo.Echo) {
	e.GET("/healthz", s.probe(s.cfg.Health))
	ready := s.probe(s.cfg.Ready)
	e.GET("/readyz", func(c echo.Context) error {
		if err := s.readyHA(c); err != nil || c.Response().Committed {
			return err
		}
		return ready(c)
	})
	e.GET("/metrics", s.metrics, s.requireMetricsReader)
}

// metrics serves the Prometheus handler; a server built without one (the
// API's own tests) answers 404, so the route table is the same either way.
func (s *server) metrics(c echo.Context) error {
	if s.cfg.Metrics == nil {
		return httpx.NotFound("metrics are not served here")
	}
	s.cfg.Metrics.ServeHTTP(c.Response(), c.Request())
	return nil
}

// probe answers 200 {"status":"ok"} when check passes (or is nil), else
// 503 {"status":"unavailable","error":...}.
func (s *server) probe(check func(ctx context.Context) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		if check != nil {
			ctx, cancel := context.WithTimeout(c.Request().Context(), healthTimeout)
			defer cancel()
			if err := check(ctx); err != nil {
				return c.JSON(http.StatusServiceUnavailable, wire.Health{Status: "unavailable", Error: err.Error()})
			}
		}
		return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
	}
}

// requireMetricsReader guards /metrics. With auth on it needs a user
// token, an API key or the metrics token; with the ACL on as well, an
// admin's or the metrics token. With auth off it is open, but
// only under this server's names, as /api is (see guard.go): a page whose
// name was rebound to 127.0.0.1 must not read the workspaces' and tasks'
// names out of it.
func (s *server) requireMetricsReader(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.auth == nil {
			if r := c.Request(); !s.guard.hostAllowed(r.Host) {
				return errMisdirected(r.Host)
			}
			return next(c)
		}
		token := httpx.BearerToken(c.Request())
		if token == "" {
			return auth.ErrMissingToken
		}
		if t := s.cfg.MetricsToken; t != "" && sameSecret(token, t) {
			return next(c)
		}
		p, err := s.auth.Authenticate(c.Request().Context(), token)
		if err != nil {
			return err
		}
		if s.cfg.ACL != nil && !p.User.IsAdmin {
			// Its series name every workspace and task with their job
			// counts, those the ACL hides from this user too.
			return echo.NewHTTPError(http.StatusForbidden, "with the ACL on, /metrics is for admins and the metrics_token only (it names every task)")
		}
		return next(c)
	}
}
