package runners

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
)

// Kind declares a runner: the name an assignment's `runner` gives, the
// capability tag a worker holding it gets (and a step run by it needs), and
// how a worker finds out at start-up that it can run it. Each runner declares
// its kind in its own file (registerKind in an init function), so adding a
// runner touches that file and its tests, nothing else.
type Kind struct {
	Name string
	// Tag is the capability tag ("" = every worker has the runner).
	Tag string
	// Detect returns the runner when this machine can run it; nil without
	// an error when it cannot (not configured, nothing answers), having
	// logged why. An error is a configuration that cannot work.
	Detect func(ctx context.Context, env DetectEnv) (Runner, error)
}

// DetectEnv is what runners' detection reads: each runner's section of the
// worker's configuration.
type DetectEnv struct {
	// Worker is the worker's name (pods are labelled with it).
	Worker     string
	Docker     DockerConfig
	Kubernetes *KubernetesConfig // nil = no kubernetes section
	Log        *slog.Logger
}

// kinds is filled by the runners' init functions only, before main runs,
// and read-only afterwards.
var kinds = map[string]Kind{}

func registerKind(k Kind) {
	if _, dup := kinds[k.Name]; dup {
		panic("runners: kind " + k.Name + " registered twice")
	}
	kinds[k.Name] = k
}

// Kinds lists the declared runners, by name.
func Kinds() []Kind {
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CapabilityTag is the tag a worker needs to run steps of the named runner
// ("" for the local runner and for names no runner declares). The engine's
// routing is given this function (engine.Config.RunnerTag).
func CapabilityTag(runner string) string {
	return kinds[runner].Tag
}

// DetectRunners asks every declared runner whether this machine can run it
// and returns those that can, by name, with the capability tags they bring.
func DetectRunners(ctx context.Context, env DetectEnv) (map[string]Runner, []string, error) {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	found := map[string]Runner{}
	var tags []string
	for _, k := range Kinds() {
		r, err := k.Detect(ctx, env)
		if err != nil {
			return nil, nil, fmt.Errorf("%s runner: %w", k.Name, err)
		}
		if r == nil {
			continue
		}
		found[k.Name] = r
		if k.Tag != "" && !slices.Contains(tags, k.Tag) {
			tags = append(tags, k.Tag)
		}
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
