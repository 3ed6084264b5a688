package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
)

// HA makes the server one replica of several on one database: while
// another leads, it forwards what only the leader may answer.
type HA struct {
	// Leader says whether this replica leads and, when it does not,
	// the leader's advertise_url ("" while none does: a failover).
	Leader func() (leads bool, leaderURL string)
	// PeerSecret (ha.peer_secret) is what a forwarding replica proves
	// itself with: the leader believes the client address and the checks
	// a peer says it made only from a request that carries it.
	PeerSecret string
	// Self is this replica's advertise_url, for /api/config.
	Self string
}

const (
	// peerHeader carries the peer secret between replicas.
	peerHeader = "X-Appliance-Peer"
	// clientHeader carries the client's address as the forwarding
	// replica found it (behind its trusted proxies).
	clientHeader = "X-Appliance-Client"
)

// forwardedPrefixes are the paths the leader answers: what reads or
// writes the engine's state, and the streams of it.
var forwardedPrefixes = []string{"/api", "/worker", "/hooks", "/mcp"}

func forwardedPath(p string) bool {
	if p == "/api/config" { // each replica says which it is
		return false
	}
	for _, pre := range forwardedPrefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// fromPeer says whether r comes from another replica: it carries the
// peer secret.
func (s *server) fromPeer(r *http.Request) bool {
	ha := s.cfg.HA
	if ha == nil || ha.PeerSecret == "" {
		return false
	}
	got := r.Header.Get(peerHeader)
	return got != "" && sameSecret(got, ha.PeerSecret)
}

// clientAddr is c.RealIP(): the address a peer passes for a request it
// forwards, else what the trusted proxies say (auth.ClientAddr).
func (s *server) clientAddr() echo.IPExtractor {
	base := auth.ClientAddr(s.cfg.TrustedProxies)
	return func(r *http.Request) string {
		if s.fromPeer(r) {
			if a, err := netip.ParseAddr(r.Header.Get(clientHeader)); err == nil {
				return a.String()
			}
		}
		return base(r)
	}
}

// errNoLeader is the answer while no replica leads: the seconds of a
// failover, which the CLI and workers wait out (Retry-After).
var errNoLeader = &httpx.RetryLater{Status: http.StatusServiceUnavailable, After: time.Second,
	Msg: "no replica leads at the moment (a failover is under way): try again in a few seconds"}

// forwardToLeader runs after this replica's own Host, Origin and size
// checks and before authentication, which stays the leader's: a
// follower sends every forwarded path to the leader, streams included
// (SSE flushed as it comes, WebSocket upgraded through).
func (s *server) forwardToLeader(next echo.HandlerFunc) echo.HandlerFunc {
	ha := s.cfg.HA
	if ha == nil {
		return next
	}
	proxies := &proxyCache{secret: ha.PeerSecret, log: s}
	return func(c echo.Context) error {
		r := c.Request()
		if !forwardedPath(r.URL.Path) {
			return next(c)
		}
		leads, leader := ha.Leader()
		switch {
		case leads:
			return next(c)
		case s.fromPeer(r):
			// Forwarded here by a replica that thinks this one leads:
			// it no longer does (or not yet); never forward twice.
			return errNoLeader
		case leader == "":
			return errNoLeader
		}
		p, err := proxies.get(leader)
		if err != nil {
			s.log.Error("leader's advertise_url does not parse", "url", leader, "err", err)
			return errNoLeader
		}
		r.Header.Del(peerHeader)
		r.Header.Set(clientHeader, c.RealIP())
		p.ServeHTTP(c.Response(), r)
		return nil
	}
}

// proxyCache keeps one reverse proxy per leader URL (its connections).
type proxyCache struct {
	secret string
	log    *server
	mu     sync.Mutex
	url    string
	proxy  *httputil.ReverseProxy
}

func (pc *proxyCache) get(leader string) (*httputil.ReverseProxy, error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.url == leader && pc.proxy != nil {
		return pc.proxy, nil
	}
	target, err := url.Parse(leader)
	if err != nil {
		return nil, err
	}
	if target.Scheme != "http" && target.Scheme != "https" || target.Host == "" {
		return nil, errors.New("not an http(s) URL")
	}
	secret := pc.secret
	pc.url, pc.proxy = leader, &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(peerHeader, secret)
			pr.Out.Header.Set("X-Forwarded-Host", pr.In.Host)
		},
		// Streams (the SSE feed, log streams, long-polls) pass each
		// write on at once.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left
			}
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				writeJSONError(w, http.StatusRequestEntityTooLarge, "request body is larger than the server's limit")
				return
			}
			pc.log.log.Warn("forward to the leader failed", "leader", leader, "path", r.URL.Path, "err", err)
			// Not retried here: the leader may have acted on it. The
			// client retries (an execute with its Idempotency-Key).
			w.Header().Set("Retry-After", "1")
			writeJSONError(w, http.StatusServiceUnavailable, "the leader did not answer (a failover may be under way): try again in a few seconds")
		},
	}
	return pc.proxy, nil
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(wire.Error{Error: msg})
}

// readyHA is /readyz's answer on a follower: 503, naming the leader, so
// a load balancer routes around it; nil on the leader or a lone server.
func (s *server) readyHA(c echo.Context) error {
	ha := s.cfg.HA
	if ha == nil {
		return nil
	}
	leads, leader := ha.Leader()
	if leads {
		return nil
	}
	if leader == "" {
		c.Response().Header().Set("Retry-After", "1")
	}
	return c.JSON(http.StatusServiceUnavailable, wire.Health{Status: "follower", Leader: &leader})
}

// haStatus is /api/config's ha field.
func (s *server) haStatus() *wire.HAStatus {
	ha := s.cfg.HA
	if ha == nil {
		return nil
	}
	leads, leader := ha.Leader()
	if leads {
		leader = ha.Self
	}
	return &wire.HAStatus{Replica: ha.Self, Leader: leader, Leading: leads}
}
