package runners

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"
)

// Kind declares a runner: the name an assignment's `runner` gives, the
// capability tag a worker holding it gets (and a step run by it needs), and
// how a worker finds out at start-up that it can run it. Each runner's
// package makes its kind (local.Kind, docker.Kind, pod.Kind) with its
// section of the worker's configuration bound in Detect; the program's
// wiring lists them in a Registry, so this package imports none of them.
type Kind struct {
	Name string
	// Tag is the capability tag ("" = every worker has the runner).
	Tag string
	// Detect returns the runner when this machine can run it; nil without
	// an error when it cannot (not configured, nothing answers), having
	// logged why. An error is a configuration that cannot work.
	Detect func(ctx context.Context, env DetectEnv) (Runner, error)
}

// DetectTimeout bounds a runner's start-up probe (a daemon's ping, a
// cluster's list of pods).
const DetectTimeout = 3 * time.Second

// DetectEnv is what every runner's detection reads (its own section of the
// configuration is bound in its Kind).
type DetectEnv struct {
	// Worker is the worker's name (pods are labelled with it).
	Worker string
	Log    *slog.Logger
}

// Registry is the runners a program holds, by name: it chooses the runner
// of an assignment's `runner` and the capability tag a step of it needs.
// It is built once at start-up and read-only afterwards.
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry holds kinds; a name given twice is a programming error.
func NewRegistry(kinds ...Kind) *Registry {
	r := &Registry{kinds: make(map[string]Kind, len(kinds))}
	for _, k := range kinds {
		if _, dup := r.kinds[k.Name]; dup {
			panic("runners: kind " + k.Name + " registered twice")
		}
		r.kinds[k.Name] = k
	}
	return r
}

// Kinds lists the declared runners, by name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CapabilityTag is the tag a worker needs to run steps of the named runner
// ("" for the local runner and for names no runner declares). The engine's
// routing is given this method (engine.Config.RunnerTag).
func (r *Registry) CapabilityTag(runner string) string {
	return r.kinds[runner].Tag
}

// Detect asks every declared runner whether this machine can run it and
// returns those that can, by name, with the capability tags they bring.
func (r *Registry) Detect(ctx context.Context, env DetectEnv) (map[string]Runner, []string, error) {
	if env.Log == nil {
		env.Log = slog.Default()
	}
	found := map[string]Runner{}
	var tags []string
	for _, k := range r.Kinds() {
		run, err := k.Detect(ctx, env)
		if err != nil {
			return nil, nil, fmt.Errorf("%s runner: %w", k.Name, err)
		}
		if run == nil {
			continue
		}
		found[k.Name] = run
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
