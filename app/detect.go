package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/docker"
	"github.com/appliance-sh/appliance/runners/worker"
)

// detectRunners adds the runners this machine can offer (each runner's
// detection: docker when a daemon answers, pod when the kubernetes section's
// cluster answers) to a worker's config, with the capability tags they bring.
func detectRunners(ctx context.Context, sec config.Docker, kube *config.Kubernetes, serverURL string, cfg *worker.Config, log *slog.Logger) error {
	dc := docker.Config{Endpoint: sec.Endpoint, Images: sec.Images, Log: log}
	if sec.KillGrace != "" {
		d, err := time.ParseDuration(sec.KillGrace)
		if err != nil || d < time.Second {
			return fmt.Errorf("docker.kill_grace: want a duration of at least 1s, got %q", sec.KillGrace)
		}
		dc.KillGrace = d
	}
	kc, err := kube.RunnerConfig(serverURL)
	if err != nil {
		return err
	}
	if kc != nil && len(kc.Images) == 0 {
		kc.Images = sec.Images // pods run scripts in the docker section's images
	}
	found, tags, err := runnerRegistry(dc, kc).Detect(ctx, runners.DetectEnv{Worker: cfg.Name, Log: log})
	if err != nil {
		return err
	}
	if cfg.Runners == nil {
		cfg.Runners = map[string]runners.Runner{}
	}
	// Runners set beforehand (a test's, say) are kept.
	for name, r := range found {
		if _, set := cfg.Runners[name]; !set {
			cfg.Runners[name] = r
		}
	}
	cfg.Tags = runners.MergeTags(cfg.Tags, tags)
	return nil
}
