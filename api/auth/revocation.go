package auth

import (
	"context"
	"sync"

	"github.com/labstack/echo/v4"
)

// Credentials end everywhere at once (DESIGN.md "Safe by default"): a
// request checks its credential when it arrives, but a stream (GET
// /api/events, the log WebSocket) outlives that check. So each open stream
// re-checks its caller when a revocation concerns them, at once, and every
// api.Config.StreamRecheck otherwise (a refresh token that expires, a change
// made behind the API's back): its API key or login still standing, its
// user still there, and with the user's current groups and the ACL in
// force, what it shows still visible. The expiry of the access token it
// opened with is no revocation: a follower of a long job outlives it.

// revocations tells the open streams of a user, at once, that one of
// their credentials or permissions changed. Whoever revokes calls
// changed after the change is committed; a stream follows them with
// Service.Watch.
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

// Watch subscribes to the changes of userID's credentials and groups
// until stop is called: changed holds one pending signal, however many
// changes came since the stream last looked. It never fires with auth off.
func (a *Service) Watch(userID string) (changed <-chan struct{}, stop func()) {
	w, stop := a.revocations.watch(userID)
	return w.c, stop
}

// Revoked is why a credential no longer stands (an API key revoked or
// expired, a login ended, its user deleted): a request gets 401 for it,
// an open stream ends with it.
type Revoked struct{ Reason string }

func (e *Revoked) Error() string { return e.Reason }

func credentialGone(reason string) *Revoked { return &Revoked{Reason: reason} }

// Recheck re-reads the credential and user of the request's caller and
// puts the fresh principal (groups, admin flag) in c, for a stream that
// outlives its request's check. A *Revoked says the credential no longer
// stands; other errors are the store's. The access token's own signature
// and expiry are not checked again: a follower of a long job outlives
// them. Without a caller it does nothing.
func (a *Service) Recheck(ctx context.Context, c echo.Context) error {
	p := Caller(c)
	if p == nil {
		return nil
	}
	fresh, _, err := a.resolve(ctx, p)
	if err != nil {
		return err
	}
	c.Set(principalKey, fresh)
	return nil
}
