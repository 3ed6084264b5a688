package app

import (
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/docker"
	"github.com/appliance-sh/appliance/runners/local"
	"github.com/appliance-sh/appliance/runners/pod"
)

// runnerRegistry is the table of the runners this program holds, each
// bound to its section of the config (dc the docker section, kc the
// kubernetes one: nil offers no pod runner). It is the one place that
// names every runner: the runners package imports none of them.
func runnerRegistry(dc docker.Config, kc *pod.Config) *runners.Registry {
	return runners.NewRegistry(local.Kind(), docker.Kind(dc), pod.Kind(kc))
}

// runnerTags is the capability tag a step of each runner needs, for the
// engine's routing (the tags do not depend on the config).
var runnerTags = runnerRegistry(docker.Config{}, nil)
