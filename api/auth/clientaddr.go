package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// ClientAddr is the IPExtractor that finds a request's client address
// behind the trusted proxies: the server installs it in echo, so
// c.RealIP() is that address everywhere (the login limits, logs, an audit
// trail). Echo's default extractor
// believes X-Forwarded-For and X-Real-IP from anyone: with it, a flood
// could pick a fresh address per request.
//
// The socket's peer is the client, unless it is a trusted proxy: then the
// proxy's forwarding header is read right to left, past the hops that are
// trusted proxies too, and the first address that is not is the client.
// Whatever stands left of that address was written by the client itself
// and is never read.
func ClientAddr(trusted []netip.Prefix) echo.IPExtractor {
	return clientAddrs{trusted: trusted}.extract
}

// clientAddrs finds the client address behind the trusted proxies.
type clientAddrs struct {
	trusted []netip.Prefix
}

// extract is the client address of r as a string (echo.IPExtractor).
func (a clientAddrs) extract(r *http.Request) string {
	ip, ok := a.client(r)
	if !ok {
		return peerHost(r.RemoteAddr) // not an IP: a unix socket, a test's pipe
	}
	return ip.String()
}

func (a clientAddrs) client(r *http.Request) (netip.Addr, bool) {
	peer, err := netip.ParseAddr(peerHost(r.RemoteAddr))
	if err != nil {
		return netip.Addr{}, false
	}
	peer = peer.Unmap()
	if !a.isTrusted(peer) {
		return peer, true
	}
	// X-Forwarded-For and Forwarded carry the same chain in two syntaxes.
	// A proxy writes one of them (some both) and passes the other through
	// as the client sent it, so when both are present and their readings
	// differ, one of them is the client's invention: the request is then
	// judged by its peer, the nearest proxy.
	xff, xffSet := a.walk(peer, forwardedFor(r.Header.Values("X-Forwarded-For")))
	fwd, fwdSet := a.walk(peer, forwardedElements(r.Header.Values("Forwarded")))
	switch {
	case xffSet && fwdSet && xff != fwd:
		return peer, true
	case xffSet:
		return xff, true
	case fwdSet:
		return fwd, true
	}
	return peer, true
}

// walk reads hops (left to right as written, nearest proxy last) right to
// left from the trusted peer, and returns the first that is not a trusted
// proxy. A hop that is not an address ("unknown", an obfuscated name, a
// typo) ends the walk at the last trusted address: what stands beyond it
// cannot be told. set is false when there are no hops.
func (a clientAddrs) walk(peer netip.Addr, hops []string) (ip netip.Addr, set bool) {
	if len(hops) == 0 {
		return peer, false
	}
	ip = peer
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(hops[i])
		if err != nil {
			return ip, true
		}
		ip = hop.Unmap()
		if !a.isTrusted(ip) {
			return ip, true
		}
	}
	return ip, true // every hop a trusted proxy: the farthest one is the client
}

func (a clientAddrs) isTrusted(ip netip.Addr) bool {
	for _, p := range a.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// forwardedFor splits X-Forwarded-For headers ("client, proxy1, proxy2",
// possibly over several header lines) into hops.
func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			hops = append(hops, hopAddress(strings.TrimSpace(h)))
		}
	}
	return hops
}

// forwardedElements reads the for= of each element of Forwarded headers
// (RFC 7239: `for=192.0.2.60;proto=https, for="[2001:db8::1]:4711"`); an
// element without one is a hop of unknown address.
func forwardedElements(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, elem := range strings.Split(v, ",") {
			hop := ""
			for _, pair := range strings.Split(elem, ";") {
				name, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(name, "for") {
					hop = hopAddress(strings.Trim(value, `"`))
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// hopAddress drops the port and IPv6 brackets of a hop ("[::1]:80",
// "192.0.2.1:4711"); anything else is left for ParseAddr to refuse.
func hopAddress(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		return host
	}
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// peerHost is the host of a RemoteAddr.
func peerHost(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	return host
}

// rateKey is the rate-limit key of a client address: its IP, or for IPv6
// its /64, since one host commonly holds a whole /64.
func rateKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil || !ip.Is6() {
		return addr
	}
	prefix, _ := ip.Prefix(64)
	return prefix.String()
}
