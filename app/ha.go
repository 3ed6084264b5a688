package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/runners/worker"
	"github.com/appliance-sh/appliance/store/postgres"
)

// replica is a server's side of a pair on one database (the ha section):
// the elector takes and renews the lease, and the server runs a term
// (term.go) only while it leads. Between terms it follows: the API
// forwards to the leader (api/ha.go) and nothing here decides.
type replica struct {
	s       *Server
	elector *postgres.Elector
	metric  *metrics.Leadership

	electing, leading *component
}

// releaseTimeout bounds giving the lease up at shutdown; past it the
// lease runs out by itself.
const releaseTimeout = 5 * time.Second

// newReplica makes the elector over the server's database. From here on
// the database refuses this process's writes of the state until it leads.
func newReplica(s *Server) (*replica, error) {
	if s.storage.pg == nil {
		return nil, fmt.Errorf("ha: needs storage.type: postgres")
	}
	cfg := s.cfg.HA
	el, err := s.storage.pg.NewElector(postgres.ElectorConfig{Holder: holderName(), AdvertiseURL: cfg.AdvertiseURL,
		Lease: cfg.Lease, Renew: cfg.Renew, Log: s.log.With("component", "leadership")})
	if err != nil {
		return nil, err
	}
	return &replica{s: s, elector: el, metric: s.metrics.WatchLeadership()}, nil
}

// holderName names this process in the lease row: a restarted replica is
// another holder, which waits for the lease like any other.
func holderName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", hostname(), os.Getpid(), hex.EncodeToString(b))
}

// apiConfig is the API's side of the pair (nil on a lone server).
func (r *replica) apiConfig() *api.HA {
	if r == nil {
		return nil
	}
	return &api.HA{Leader: r.leader, PeerSecret: r.s.cfg.HA.PeerSecret, Self: r.s.cfg.HA.AdvertiseURL}
}

// leader is what the API forwards by. This replica answers once its
// term's engine is in place; while it holds the lease but still loads the
// state, or while no replica holds it, requests get 503 and Retry-After.
func (r *replica) leader() (bool, string) {
	if r.s.current.leads() {
		return true, ""
	}
	l := r.elector.Current()
	if l.Leader || l.LeaderURL == r.s.cfg.HA.AdvertiseURL {
		return false, ""
	}
	return false, l.LeaderURL
}

// start runs the elector and the leadership loop under the server's
// supervisor (nil: a lone server, nothing to start).
func (r *replica) start() {
	if r == nil {
		return
	}
	r.electing = r.s.sup.start("leadership elector", func(ctx context.Context) error {
		r.elector.Run(ctx)
		return nil
	})
	r.leading = r.s.sup.start("leadership", r.lead)
}

// stop ends the term as a lone server's shutdown does (the in-process
// workers drain, the lease renewed meanwhile), then stops the elector and
// gives the lease up, so another replica leads within a renew interval.
func (r *replica) stop() error {
	r.leading.stop()
	r.electing.stop()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return r.elector.Release(ctx)
}

// lead starts a term when the elector leads and ends it when it no longer
// does, until ctx ends. A term that fails (a component stopped: the
// database went away, a write was refused) ends, and a new one starts
// after a renew interval if this replica still leads: it loads the state
// again as a restart would.
func (r *replica) lead(ctx context.Context) error {
	var (
		t      *term
		failed <-chan struct{}
		retry  <-chan time.Time
	)
	for {
		l := r.elector.Current()
		switch {
		case l.Leader && t == nil && retry == nil:
			var err error
			if t, err = r.begin(ctx, l.Epoch); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.s.log.Error("leadership: cannot start leading; trying again", "epoch", l.Epoch, "err", err)
				retry = time.After(r.s.cfg.HA.Renew)
			} else {
				failed = t.sup.failed.Done()
			}
		case !l.Leader && t != nil:
			// The lease is gone: the steps of this replica's workers run
			// again on the new leader, so they stop at once.
			r.end(t, "the lease was lost", worker.ErrStopNow)
			t, failed = nil, nil
		}
		select {
		case <-ctx.Done():
			if t != nil {
				r.end(t, "shutting down", nil)
			}
			return nil
		case <-r.elector.Changed():
		case <-failed:
			r.end(t, "a component failed", worker.ErrStopNow)
			t, failed = nil, nil
			retry = time.After(r.s.cfg.HA.Renew)
		case <-retry:
			retry = nil
		}
	}
}

// begin starts leading at epoch: the state is loaded from the database,
// as at a restart, and the term's components start.
func (r *replica) begin(ctx context.Context, epoch int64) (*term, error) {
	s := r.s
	began := time.Now()
	s.log.Info("leadership: leading; loading the state", "epoch", epoch)
	// Seeded by the leader only: two replicas starting together would
	// both find no user.
	if created, err := seedInitialUser(ctx, s.storage.users, s.cfg.Auth, time.Now()); err != nil {
		return nil, err
	} else if created {
		s.log.Info("created the initial admin user", "email", s.cfg.Auth.InitialUser.Email)
	}
	t, err := s.loadTerm(ctx)
	if err != nil {
		return nil, err
	}
	t.epoch = epoch
	t.ended = make(chan struct{})
	if *s.cfg.Workers > 0 {
		s.ready.expect(inProcessPart)
	}
	s.startTerm(t, newSupervisor())
	r.metric.Set(true)
	s.log.Info("leadership: this replica leads: orchestrator, scheduler, event sources and workers started",
		"epoch", epoch, "took", time.Since(began).Round(time.Millisecond))
	return t, nil
}

// end stops leading: the API forwards from now on, and the term's
// components stop (with cause, the in-process workers kill their steps
// instead of draining them). A deposed leader's last writes are refused
// by the fence; its errors are logged, not fatal.
func (r *replica) end(t *term, why string, cause error) {
	s := r.s
	s.current.set(nil)
	s.termMu.Lock()
	s.term = nil
	s.termMu.Unlock()
	close(t.ended)
	r.metric.Set(false)
	t.stopWork(cause)
	t.orchestrator.stop()
	s.ready.done(inProcessPart)
	if err := t.sup.wait(); err != nil {
		s.log.Warn("leadership: stopped leading", "epoch", t.epoch, "why", why, "err", err)
		return
	}
	s.log.Info("leadership: stopped leading", "epoch", t.epoch, "why", why)
}

// endStreams ends the WebSocket log streams a term served when it ends:
// they wait for their job on an engine that is gone, and their viewers
// reconnect, to be forwarded to the new leader. Other requests end with
// the engine's own answer (503, engine stopped).
func (r *replica) endStreams(h http.Handler) http.Handler {
	if r == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t := r.s.currentTerm()
		if t == nil || !strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			h.ServeHTTP(w, req)
			return
		}
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		go func() {
			select {
			case <-t.ended:
				cancel()
			case <-ctx.Done():
			}
		}()
		h.ServeHTTP(w, req.WithContext(ctx))
	})
}
