package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/engine"
)

// An open stream (GET /api/events, the log WebSocket) outlives the check
// of its request, so it re-checks its caller (see auth/revocation.go): at
// once on a revocation auth makes or an ACL reload, and every
// Config.StreamRecheck otherwise.

// streamEnd is why a stream must end: status is 401 when its credential
// is gone and 403 when it may no longer see what it shows.
type streamEnd struct {
	status int
	reason string
}

func (e *streamEnd) Error() string { return e.reason }

// accessLost is the end of a stream whose caller may no longer view what
// it shows; the ACL's 404 (the thing does not exist for them) becomes 403.
func accessLost(err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return &streamEnd{status: http.StatusForbidden, reason: "you may no longer view this (your groups or the ACL changed)"}
	}
	return err
}

// streamGuard re-checks the caller of one open stream. With auth off it
// is inert: its channels never fire and check passes.
type streamGuard struct {
	s *server
	c echo.Context
	// still says whether the stream may go on showing what it shows, with
	// the caller's fresh principal in c (a 404 becomes the end 403).
	still func() error
	// revoked fires on a change of the caller's credentials or groups,
	// aclChanged on an ACL reload, tick every Config.StreamRecheck and
	// once at the start: a revocation between the request's authentication
	// and the watch's start fires nothing, so the first check is due at
	// once (check re-arms tick with the ticker's).
	revoked    <-chan struct{}
	aclChanged <-chan struct{}
	tick       <-chan time.Time
	ticker     *time.Ticker
	stop       func()
}

// guardStream starts re-checking the caller of c's stream; call stop when
// the stream ends.
func (s *server) guardStream(c echo.Context, still func() error) *streamGuard {
	g := &streamGuard{s: s, c: c, still: still, stop: func() {}}
	p := auth.Caller(c)
	if p == nil {
		return g
	}
	revoked, unwatch := s.auth.Watch(p.User.ID)
	t := time.NewTicker(s.cfg.StreamRecheck)
	now := make(chan time.Time, 1)
	now <- time.Now()
	g.revoked, g.aclChanged, g.tick, g.ticker = revoked, s.cfg.ACL.Changed(), now, t
	g.stop = func() { t.Stop(); unwatch() }
	return g
}

// due reports, without waiting, whether a re-check is due: a stream asks
// before it sends anything, so nothing goes out after a revocation that
// was committed before it.
func (g *streamGuard) due() bool {
	select {
	case <-g.revoked:
	case <-g.aclChanged:
	case <-g.tick:
	default:
		return false
	}
	return true
}

// check re-reads the caller's credential and user, puts the fresh
// principal (groups, admin flag) in the stream's context, and asks still
// whether the stream may go on. A *streamEnd says why it must end; a
// store that cannot answer is logged and the stream goes on until the
// next check.
func (g *streamGuard) check(ctx context.Context) *streamEnd {
	// Re-arm first: an ACL reload during the check is seen at the next.
	g.aclChanged = g.s.cfg.ACL.Changed()
	if g.ticker != nil {
		g.tick = g.ticker.C
	}
	if g.s.auth != nil {
		if err := g.s.auth.Recheck(ctx, g.c); err != nil {
			return g.end(err)
		}
	}
	return g.end(accessLost(g.still()))
}

func (g *streamGuard) end(err error) *streamEnd {
	var (
		end     *streamEnd
		revoked *auth.Revoked
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &end):
		return end
	case errors.As(err, &revoked):
		return &streamEnd{status: http.StatusUnauthorized, reason: revoked.Reason}
	case errors.Is(err, context.Canceled):
		return nil // the stream is ending anyway
	}
	g.s.log.Warn("re-check of a stream's caller failed; trying again later", "path", g.c.Path(), "err", err)
	return nil
}
