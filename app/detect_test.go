package app

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/worker"
)

// A runner set before detection (a benchmark's no-op runner, say) stays:
// detection only adds the runners not set yet.
func TestDetectRunnersKeepsRunnersSetBefore(t *testing.T) {
	mine := noopRunner{}
	cfg := worker.Config{Name: "w", Runners: map[string]runners.Runner{"local": mine}}
	noDocker := config.Docker{Endpoint: "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")}
	if err := detectRunners(context.Background(), noDocker, nil, "", &cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if got, ok := cfg.Runners["local"].(noopRunner); !ok || got != mine {
		t.Fatalf("local runner = %T, want the one set before detection", cfg.Runners["local"])
	}
	if _, ok := cfg.Runners["docker"]; ok {
		t.Error("a docker runner was detected without a daemon")
	}
}

// noopRunner runs nothing and succeeds.
type noopRunner struct{}

func (noopRunner) Run(context.Context, *runners.Step) (int, error) { return 0, nil }
