package config

import (
	"strings"
	"testing"
)

func TestLoopbackAddresses(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.9.9.9:1": true, "[::1]:8080": true, "localhost:8080": true, "LocalHost:0": true,
		"0.0.0.0:8080": false, ":8080": false, "[::]:8080": false, "192.168.1.5:8080": false, "myhost:8080": false,
		"localhost.evil.example:80": false,
	} {
		if got := isLoopbackAddr(addr); got != want {
			t.Errorf("isLoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestExposureNeedsAuthOrTheOptIn(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Server
		refused  bool
		exposed  bool
		mentions string
	}{
		{"loopback without auth", Server{Listen: "127.0.0.1:8080"}, false, false, ""},
		{"network without auth", Server{Listen: "0.0.0.0:8080"}, true, true, "insecure_no_auth: true"},
		{"all interfaces without auth", Server{Listen: ":8080"}, true, true, "--insecure-no-auth"},
		{"network with the opt-in", Server{Listen: "0.0.0.0:8080", InsecureNoAuth: true}, false, true, ""},
		{"network with auth", Server{Listen: "0.0.0.0:8080", Auth: &Auth{}}, false, false, ""},
	}
	for _, c := range cases {
		err := c.cfg.CheckExposure()
		if (err != nil) != c.refused || (err != nil && !strings.Contains(err.Error(), c.mentions)) {
			t.Errorf("%s: CheckExposure() = %v, want refused=%v mentioning %q", c.name, err, c.refused, c.mentions)
		}
		if got := c.cfg.ExposedWithoutAuth(); got != c.exposed {
			t.Errorf("%s: ExposedWithoutAuth() = %v, want %v", c.name, got, c.exposed)
		}
	}
}

func TestAllowedOriginsMustBeOrigins(t *testing.T) {
	if err := checkAllowedOrigins([]string{"https://ui.example.com", "http://localhost:3000/"}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"ui.example.com", "https://ui.example.com/app", "ftp://x", "https://"} {
		if err := checkAllowedOrigins([]string{bad}); err == nil || !strings.Contains(err.Error(), "scheme://host[:port]") {
			t.Errorf("allowed_origins %q: err %v", bad, err)
		}
	}
}
