package app

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
)

func TestSettingsSayWhetherAuthIsOn(t *testing.T) {
	for _, tc := range []struct {
		auth func(*config.Server)
		want string
	}{
		{func(*config.Server) {}, "auth:                  off"},
		{withAuth, "auth:                  on, providers local (internal)"},
	} {
		cfg, err := config.LoadServer("")
		if err != nil {
			t.Fatal(err)
		}
		tc.auth(cfg)
		var out bytes.Buffer
		printSettings(&out, cfg, "127.0.0.1:1", nil, 0)
		if !strings.Contains(out.String(), tc.want) {
			t.Fatalf("settings:\n%s\nwant a line %q", out.String(), tc.want)
		}
	}
}

func TestSettingsShowTheConsumerSlotsApartFromTheJobSlots(t *testing.T) {
	cfg, err := config.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	two := 2
	cfg.Workers = &two
	var out bytes.Buffer
	printSettings(&out, cfg, "127.0.0.1:1", []string{"docker"}, 1)
	if want := "workers (in-process):  2 (+1 for event-source consumers), tags [docker]"; !strings.Contains(out.String(), want) {
		t.Fatalf("settings:\n%s\nwant a line %q", out.String(), want)
	}
}

// Secrets long enough for validation.
const (
	testJWTSecret     = "jwt-secret-0123456789abcdef0123456789"
	testRefreshSecret = "refresh-secret-0123456789abcdef012345"
)

// withAuth turns auth on with an internal provider and an initial user.
func withAuth(c *config.Server) {
	c.Auth = &config.Auth{
		JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
		Providers:   map[string]config.AuthProvider{"local": {ProviderType: "internal"}},
		InitialUser: &config.InitialUser{Email: "admin@example.com", Password: "first-password"},
	}
}

func TestServeRefusesANetworkListenWithoutAuth(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := runServe([]string{"--listen", "0.0.0.0:0", "--data-dir", filepath.Join(dir, "data"), "--workspace", "../examples", "--workers", "0"}, &stdout, &stderr)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
	}
	for _, want := range []string{"0.0.0.0:0", "auth is off", "insecure_no_auth: true", "--insecure-no-auth"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not mention %q: %s", want, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("it started: %s", stdout.String())
	}
}

func TestReadinessWaitsForEveryPartUntilShutdown(t *testing.T) {
	r := newReadiness("the in-process workers to register")
	ctx := context.Background()
	if err := r.check(ctx); err == nil || !strings.Contains(err.Error(), "starting: waiting for the in-process workers to register") {
		t.Fatalf("before start-up finished: %v", err)
	}
	r.done("the in-process workers to register")
	if err := r.check(ctx); err != nil {
		t.Fatalf("after start-up: %v", err)
	}
	r.stop()
	if err := r.check(ctx); err == nil || err.Error() != "shutting down" {
		t.Fatalf("during shutdown: %v", err)
	}
}
