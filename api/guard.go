package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// A workflow server runs code, and with auth off a browser on the same
// machine has no token to leak: the server itself must refuse what a web
// page can make a browser send. guardBrowsers does that for /api:
//
//   - 421 for a Host that is not this server's (DNS rebinding: a page of
//     evil.example whose name now resolves to 127.0.0.1 is same-origin with
//     the API as far as the browser knows, but still sends its own name);
//   - 403 for a state-changing request from another origin (a form post or
//     a no-cors fetch from any page the user opens);
//   - 415 for a state-changing request whose body is not JSON (the only
//     kinds of body a page can send cross-origin without asking first).
//
// /mcp gets the same checks. /worker needs a bearer token a browser cannot attach cross-origin, and
// remote workers reach it by whatever name routes to the server, so it is
// left alone; /hooks are called by other servers from anywhere.
type browserGuard struct {
	listenHost string          // lowercase host of the listen address
	listenAll  bool            // listening on every interface (0.0.0.0, ::)
	hosts      map[string]bool // allowed_hosts, lowercase, with or without port
	origins    map[string]bool // allowed_origins, normalized
	// baseURL is auth's base_url (nil when auth is off), whose host is
	// allowed too; read per request, as it may be set after start-up.
	baseURL func() string
}

func newBrowserGuard(listenAddr string, allowedHosts, allowedOrigins []string) *browserGuard {
	g := &browserGuard{hosts: map[string]bool{}, origins: map[string]bool{}}
	host, _, err := net.SplitHostPort(listenAddr)
	if err != nil {
		host = listenAddr
	}
	g.listenHost = strings.ToLower(host)
	ip := net.ParseIP(host)
	g.listenAll = host == "" || (ip != nil && ip.IsUnspecified())
	for _, h := range allowedHosts {
		g.hosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	for _, o := range allowedOrigins {
		if n, ok := normalizeOrigin(o); ok {
			g.origins[n] = true
		}
	}
	return g
}

// stateChanging are the methods a page must not make the browser send.
var stateChanging = map[string]bool{
	http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

func (s *server) guardBrowsers(next echo.HandlerFunc) echo.HandlerFunc {
	g := s.guard
	return func(c echo.Context) error {
		r := c.Request()
		// A peer forwards only what it checked itself, under the client's
		// Host (ha.go); it may have rewritten the Host to this replica's.
		if !underAPI(r.URL.Path) && !underMCP(r.URL.Path) || s.fromPeer(r) {
			return next(c)
		}
		if !g.hostAllowed(r.Host) {
			return errMisdirected(r.Host)
		}
		origin := r.Header.Get("Origin")
		if g.origins[mustNormalize(origin)] {
			// An allowed other origin (the UI served from elsewhere): the
			// browser asks first (CORS preflight) and reads the answer.
			c.Response().Header().Add("Vary", "Origin")
			c.Response().Header().Set("Access-Control-Allow-Origin", origin)
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h := c.Response().Header()
				h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				h.Set("Access-Control-Max-Age", "600")
				return c.NoContent(http.StatusNoContent)
			}
		}
		if !stateChanging[r.Method] {
			return next(c)
		}
		if err := g.checkOrigin(r); err != nil {
			return err
		}
		if err := checkJSONBody(r); err != nil {
			return err
		}
		return next(c)
	}
}

// errMisdirected is the 421 for a Host hostAllowed refuses.
func errMisdirected(host string) error {
	return echo.NewHTTPError(http.StatusMisdirectedRequest, fmt.Sprintf(
		"host %q is not this server's name: add it to allowed_hosts in the server config if it is", host))
}

func underAPI(p string) bool { return p == "/api" || strings.HasPrefix(p, "/api/") }

// underMCP: /mcp is guarded and authenticated as /api is.
func underMCP(p string) bool { return p == mcpRoute || strings.HasPrefix(p, mcpRoute+"/") }

// hostAllowed accepts loopback names and addresses on any port, the listen
// address (any address of the machine when listening on all of them: an
// IP address cannot be rebound), allowed_hosts and auth's base_url host.
func (g *browserGuard) hostAllowed(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if hostport == "" {
		return false
	}
	if g.hosts[hostport] {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]") // no port
	}
	host = strings.TrimSuffix(host, ".")
	if host == "localhost" || g.hosts[host] || host == g.listenHost {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback() || g.listenAll
	}
	if g.baseURL != nil {
		if u, err := url.Parse(g.baseURL()); err == nil && strings.EqualFold(u.Hostname(), host) {
			return true
		}
	}
	return false
}

// checkOrigin refuses a request a browser sent from another origin: its
// Origin is neither the request's own host nor an allowed origin, or
// (browsers that send no Origin) it says Sec-Fetch-Site: cross-site.
// Clients that are not browsers send neither header.
func (g *browserGuard) checkOrigin(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			return echo.NewHTTPError(http.StatusForbidden, "cross-site request refused (Sec-Fetch-Site: cross-site)")
		}
		return nil
	}
	if g.sameOrAllowedOrigin(r, origin) {
		return nil
	}
	return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
		"cross-origin request from %q refused: add the origin to allowed_origins in the server config to allow it", origin))
}

// sameOrAllowedOrigin reports whether origin is the request's own host
// (over http or https: TLS may end at a proxy) or an allowed origin.
func (g *browserGuard) sameOrAllowedOrigin(r *http.Request, origin string) bool {
	if g.origins[mustNormalize(origin)] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (a sandboxed frame, a file) included
	}
	return strings.EqualFold(u.Host, r.Host)
}

// normalizeOrigin writes an origin as a browser sends it: lowercase
// scheme://host[:port], no default port, no path.
func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || strings.Trim(u.Path, "/") != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + host, true
}

func mustNormalize(o string) string {
	n, _ := normalizeOrigin(o)
	return n
}

// checkJSONBody refuses a state-changing request whose body is not JSON.
// A request with no body and no Content-Type (cancel) is fine.
func checkJSONBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return echo.NewHTTPError(http.StatusUnsupportedMediaType, fmt.Sprintf(
		"request body must be JSON: send Content-Type: application/json (got %s)", ct))
}

// originPatterns are the allowed origins for websocket.Accept.
func (g *browserGuard) originPatterns() []string {
	out := make([]string, 0, len(g.origins))
	for o := range g.origins {
		out = append(out, o)
	}
	return out
}
