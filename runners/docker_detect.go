package runners

import (
	"context"
	"time"
)

// detectTimeout bounds the start-up probe of the Docker daemon.
const detectTimeout = 3 * time.Second

func init() {
	registerKind(Kind{Name: "docker", Tag: "docker", Detect: detectDocker})
}

// detectDocker offers the docker runner when a Docker daemon answers. A
// daemon that does not answer is not an error: the worker runs without it.
// The error is for a configuration that cannot work (an unknown language in
// cfg.Images).
func detectDocker(ctx context.Context, env DetectEnv) (Runner, error) {
	cfg := env.Docker
	if cfg.Log == nil {
		cfg.Log = env.Log
	}
	d, err := NewDocker(cfg)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, detectTimeout)
	defer cancel()
	if err := d.Ping(pingCtx); err != nil {
		env.Log.Info("no docker runner: the Docker daemon does not answer", "err", err)
		return nil, nil
	}
	env.Log.Info("docker runner available", "endpoint", d.client.Endpoint())
	return d, nil
}
