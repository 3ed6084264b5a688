package config

import (
	"strings"
	"testing"
	"time"
)

const pgStorage = "storage:\n  type: postgres\n  dsn: postgres://db/appliance\n"

func TestHASectionDefaultsAndValues(t *testing.T) {
	cfg, _, err := loadStorageConfig(t, pgStorage)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HA.Enabled() {
		t.Fatal("ha enabled without a section")
	}
	cfg, _, err = loadStorageConfig(t, pgStorage+"ha:\n  advertise_url: http://10.0.0.1:8080/\n  peer_secret: 0123456789abcdef\n")
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.HA; !h.Enabled() || h.Lease != DefaultLease || h.Renew != DefaultRenew || h.AdvertiseURL != "http://10.0.0.1:8080" {
		t.Fatalf("ha = %+v", h)
	}
	cfg, _, err = loadStorageConfig(t, pgStorage+"ha:\n  lease: 2s\n  renew: 500ms\n  advertise_url: http://a:1\n  peer_secret: 0123456789abcdef\n")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HA.Lease != 2*time.Second || cfg.HA.Renew != 500*time.Millisecond {
		t.Fatalf("ha = %+v", cfg.HA)
	}
}

func TestHASectionMistakesAreRefusedAtTheirLine(t *testing.T) {
	const ok = "  advertise_url: http://a:1\n  peer_secret: 0123456789abcdef\n"
	for _, c := range []struct{ body, want string }{
		{"ha:\n" + ok, "ha: needs storage.type: postgres"},
		{pgStorage + "ha:\n  lease: 3s\n  renew: 2s\n" + ok, ":6:10: ha.renew (2s) must be at most half of ha.lease (3s)"},
		{pgStorage + "ha:\n  lease: soon\n" + ok, ":5:10: ha.lease: want a positive duration"},
		{pgStorage + "ha:\n  peer_secret: 0123456789abcdef\n", "ha.advertise_url: required"},
		{pgStorage + "ha:\n  advertise_url: a:1\n  peer_secret: 0123456789abcdef\n", ":5:18: ha.advertise_url: want http(s)://host:port"},
		{pgStorage + "ha:\n  advertise_url: http://a:1\n  peer_secret: short\n", ":6:16: ha.peer_secret: required, at least 16"},
		{pgStorage + "ha:\n  leese: 3s\n" + ok, "leese"},
	} {
		_, _, err := loadStorageConfig(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
}
