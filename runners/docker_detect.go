package runners

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// detectTimeout bounds the start-up probe of the Docker daemon.
const detectTimeout = 3 * time.Second

// DetectRunners returns the runners this machine can offer beyond the local
// one, and the capability tags they bring (DESIGN.md "Routing"): the docker
// runner and the `docker` tag when a Docker daemon answers. A daemon that
// does not answer is not an error: the worker runs without it. The error is
// for a configuration that cannot work (an unknown language in cfg.Images).
func DetectRunners(ctx context.Context, cfg DockerConfig, log *slog.Logger) (map[string]Runner, []string, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Log == nil {
		cfg.Log = log
	}
	found := map[string]Runner{}
	var tags []string
	d, err := NewDocker(cfg)
	if err != nil {
		return nil, nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	if err := d.Ping(pingCtx); err != nil {
		log.Info("no docker runner: the Docker daemon does not answer", "err", err)
	} else {
		found["docker"] = d
		tags = append(tags, "docker")
		log.Info("docker runner available", "endpoint", d.client.Endpoint())
	}
	return found, tags, nil
}

// MergeTags is tags followed by those of extra it does not hold yet.
func MergeTags(tags, extra []string) []string {
	out := append([]string{}, tags...)
	for _, t := range extra {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
