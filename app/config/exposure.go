package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// CheckExposure refuses to serve a network without auth unless the config
// says so out loud: a request that reaches this server runs code.
func (c *Server) CheckExposure() error {
	if !c.ExposedWithoutAuth() || c.InsecureNoAuth {
		return nil
	}
	return fmt.Errorf("listen: %s is reachable from the network and auth is off, so anyone who reaches it could run "+
		"code here: turn auth on (auth: in the server config), listen on 127.0.0.1, or accept the risk with "+
		"insecure_no_auth: true in the server config or --insecure-no-auth", c.Listen)
}

// ExposedWithoutAuth reports whether the server takes requests from the
// network with auth off (allowed only by insecure_no_auth).
func (c *Server) ExposedWithoutAuth() bool {
	return c.Auth == nil && !isLoopbackAddr(c.Listen)
}

// isLoopbackAddr reports whether a listen address only takes connections
// from this machine: localhost, 127.0.0.0/8 or ::1. An empty host (":8080")
// listens on every interface.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAllowedOrigins checks allowed_origins are origins as a browser
// sends them: scheme://host[:port], nothing after.
func checkAllowedOrigins(origins []string) error {
	for i, o := range origins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.User != nil {
			return fmt.Errorf("allowed_origins[%d]: %q is not an origin (write scheme://host[:port], e.g. https://ui.example.com)", i, o)
		}
	}
	return nil
}

// TrustedProxy is an entry of trusted_proxies: a CIDR, or one address.
type TrustedProxy netip.Prefix

func (p *TrustedProxy) UnmarshalYAML(node ast.Node) error {
	var s string
	if err := yaml.NodeToValue(node, &s); err != nil {
		return err
	}
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		ip, ipErr := netip.ParseAddr(s)
		if ipErr != nil || ip.Zone() != "" {
			return errorAt(node, "trusted_proxies: %q is not a CIDR (write an address range like 10.0.0.0/8 or fd00::/8, or one address like 10.0.0.5)", s)
		}
		prefix = netip.PrefixFrom(ip, ip.BitLen())
	}
	*p = TrustedProxy(prefix.Masked())
	return nil
}

// TrustedProxyPrefixes is trusted_proxies as the api takes it.
func (c *Server) TrustedProxyPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, len(c.TrustedProxies))
	for i, p := range c.TrustedProxies {
		out[i] = netip.Prefix(p)
	}
	return out
}
