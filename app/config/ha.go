package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Defaults of the ha section.
const (
	DefaultLease = 10 * time.Second
	DefaultRenew = 2 * time.Second
)

// HA is the ha section: this server is one replica of several on one
// PostgreSQL database, of which one leads (see the README's "High
// availability").
//
//	ha:
//	  lease: 10s                            # how long a renewal holds the lease
//	  renew: 2s                             # how often the leader renews it
//	  advertise_url: http://10.0.0.1:8080   # where the other replicas reach this one
//	  peer_secret: ${APPLIANCE_PEER_SECRET} # the same on every replica
//
// Absent, the server runs alone (as with bbolt).
type HA struct {
	Lease        time.Duration
	Renew        time.Duration
	AdvertiseURL string
	PeerSecret   string
	set          bool
}

type haFields struct {
	Lease        string `yaml:"lease"`
	Renew        string `yaml:"renew"`
	AdvertiseURL string `yaml:"advertise_url"`
	PeerSecret   string `yaml:"peer_secret"`
}

// minPeerSecret is the shortest peer secret taken: it lets a request name
// its client's address to the leader.
const minPeerSecret = 16

// UnmarshalYAML decodes the section, each mistake at its line and column.
func (h *HA) UnmarshalYAML(node ast.Node) error {
	var f haFields
	if err := yaml.NodeToValue(node, &f, yaml.DisallowUnknownField()); err != nil {
		return err
	}
	out := HA{Lease: DefaultLease, Renew: DefaultRenew, set: true,
		AdvertiseURL: strings.TrimRight(strings.TrimSpace(f.AdvertiseURL), "/"), PeerSecret: f.PeerSecret}
	for _, d := range []struct {
		key, value string
		into       *time.Duration
	}{{"lease", f.Lease, &out.Lease}, {"renew", f.Renew, &out.Renew}} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		if err != nil || v <= 0 {
			return errorAt(valueAt(node, d.key), "ha.%s: want a positive duration such as 10s, got %q", d.key, d.value)
		}
		*d.into = v
	}
	if out.Renew*2 > out.Lease {
		return errorAt(valueAt(node, "renew"), "ha.renew (%s) must be at most half of ha.lease (%s): the leader renews at least twice a lease", out.Renew, out.Lease)
	}
	if out.AdvertiseURL == "" {
		return errorAt(node, "ha.advertise_url: required: the address the other replicas forward to while this one leads, such as http://10.0.0.1:8080")
	}
	if u, err := url.Parse(out.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errorAt(valueAt(node, "advertise_url"), "ha.advertise_url: want http(s)://host:port, got %q", out.AdvertiseURL)
	}
	if len(out.PeerSecret) < minPeerSecret {
		return errorAt(valueAt(node, "peer_secret"), "ha.peer_secret: required, at least %d characters, the same on every replica "+
			"(the leader believes the client address a replica passes only with it); e.g. ${APPLIANCE_PEER_SECRET}", minPeerSecret)
	}
	*h = out
	return nil
}

// Enabled says whether the section was written.
func (h HA) Enabled() bool { return h.set }

// validateHA: two replicas need one shared database.
func (c *Server) validateHA() error {
	if c.HA.Enabled() && !c.Storage.Postgres() {
		return fmt.Errorf("ha: needs storage.type: postgres (replicas share one PostgreSQL database); with bbolt a server runs alone")
	}
	return nil
}
