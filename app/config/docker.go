package config

// Docker is the `docker` section of the server and worker configs:
// where the daemon is and which images script actions with runner docker
// run in.
type Docker struct {
	// Endpoint is the daemon address (default $DOCKER_HOST, else the local socket).
	Endpoint string `yaml:"endpoint"`
	// Images maps a script language to its image (defaults: runners.DefaultImages).
	Images map[string]string `yaml:"images"`
	// KillGrace is how long a cancelled step's container has after SIGTERM (default 5s).
	KillGrace string `yaml:"kill_grace"`
}
