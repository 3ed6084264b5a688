package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/engine"
)

// Credentials end everywhere at once (DESIGN.md "Safe by default"): a
// request checks its credential when it arrives, but a stream (GET
// /api/events, the log WebSocket) outlives that check. So each open stream
// re-checks its caller when a revocation concerns them, at once, and every
// Config.StreamRecheck otherwise (a refresh token that expires, a change
// made behind the API's back): its API key or login still standing, its
// user still there, and with the user's current groups and the ACL in
// force, what it shows still visible. The expiry of the access token it
// opened with is no revocation: a follower of a long job outlives it.

// revocations tells the open streams of a user, at once, that one of
// their credentials or permissions changed. Whoever revokes calls
// changed after the change is committed.
type revocations struct {
	mu      sync.Mutex
	watches map[*revocationWatch]struct{}
}

// revocationWatch is one stream's subscription: c holds one pending
// signal, however many changes came since the stream last looked.
type revocationWatch struct {
	userID string
	c      chan struct{}
}

func newRevocations() *revocations {
	return &revocations{watches: map[*revocationWatch]struct{}{}}
}

// watch subscribes to the changes of userID until stop is called.
func (r *revocations) watch(userID string) (w *revocationWatch, stop func()) {
	w = &revocationWatch{userID: userID, c: make(chan struct{}, 1)}
	r.mu.Lock()
	r.watches[w] = struct{}{}
	r.mu.Unlock()
	return w, func() {
		r.mu.Lock()
		delete(r.watches, w)
		r.mu.Unlock()
	}
}

// changed signals every stream of userID. It never blocks: a stream that
// has a signal pending will re-check anyway.
func (r *revocations) changed(userID string) {
	if userID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for w := range r.watches {
		if w.userID == userID {
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
}

// streamEnd is why a stream must end: status is 401 when its credential
// is gone and 403 when it may no longer see what it shows.
type streamEnd struct {
	status int
	reason string
}

func (e *streamEnd) Error() string { return e.reason }

func credentialGone(reason string) *streamEnd {
	return &streamEnd{status: http.StatusUnauthorized, reason: reason}
}

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
	// aclChanged on an ACL reload, tick every Config.StreamRecheck.
	revoked    <-chan struct{}
	aclChanged <-chan struct{}
	tick       <-chan time.Time
	stop       func()
}

// guardStream starts re-checking the caller of c's stream; call stop when
// the stream ends.
func (s *server) guardStream(c echo.Context, still func() error) *streamGuard {
	g := &streamGuard{s: s, c: c, still: still, stop: func() {}}
	p := caller(c)
	if p == nil {
		return g
	}
	w, unwatch := s.auth.revocations.watch(p.user.ID)
	t := time.NewTicker(s.cfg.StreamRecheck)
	g.revoked, g.aclChanged, g.tick = w.c, s.cfg.ACL.Changed(), t.C
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
	if p := caller(g.c); p != nil {
		fresh, _, err := g.s.auth.resolve(ctx, p)
		if err != nil {
			return g.end(err)
		}
		g.c.Set(principalKey, fresh)
	}
	return g.end(accessLost(g.still()))
}

func (g *streamGuard) end(err error) *streamEnd {
	var end *streamEnd
	switch {
	case err == nil:
		return nil
	case errors.As(err, &end):
		return end
	case errors.Is(err, context.Canceled):
		return nil // the stream is ending anyway
	}
	g.s.log.Warn("re-check of a stream's caller failed; trying again later", "path", g.c.Path(), "err", err)
	return nil
}
