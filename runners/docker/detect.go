package docker

import (
	"context"

	"github.com/appliance-sh/appliance/runners"
)

// Kind declares the docker runner, detected with cfg (the worker config's
// docker section).
func Kind(cfg Config) runners.Kind {
	return runners.Kind{Name: "docker", Tag: "docker", Detect: func(ctx context.Context, env runners.DetectEnv) (runners.Runner, error) {
		return detect(ctx, cfg, env)
	}}
}

// detect offers the docker runner when a Docker daemon answers. A
// daemon that does not answer is not an error: the worker runs without it.
// The error is for a configuration that cannot work (an unknown language in
// cfg.Images).
func detect(ctx context.Context, cfg Config, env runners.DetectEnv) (runners.Runner, error) {
	if cfg.Log == nil {
		cfg.Log = env.Log
	}
	d, err := New(cfg)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, runners.DetectTimeout)
	defer cancel()
	if err := d.Ping(pingCtx); err != nil {
		env.Log.Info("no docker runner: the Docker daemon does not answer", "err", err)
		return nil, nil
	}
	env.Log.Info("docker runner available", "endpoint", d.client.Endpoint())
	return d, nil
}
