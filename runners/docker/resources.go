package docker

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// applyResources maps an action's cpu and memory requests onto container
// limits. Docker has no notion of a request, only of a cap, so a request
// becomes the cap: `cpu` (cores, "2", "0.5", or millicores, "500m") sets
// NanoCPUs, a hard quota of CPU time; `memory` (bytes, or Kubernetes
// suffixes: Ki Mi Gi Ti binary, k M G T decimal) sets the memory limit, past
// which the kernel kills the step.
func applyResources(hc *docker.HostConfig, r *workflow.Resources) error {
	if r == nil {
		return nil
	}
	if r.CPU != "" {
		n, err := parseCPU(r.CPU)
		if err != nil {
			return err
		}
		hc.NanoCPUs = n
	}
	if r.Memory != "" {
		n, err := parseMemory(r.Memory)
		if err != nil {
			return err
		}
		hc.Memory = n
	}
	return nil
}

// parseCPU reads a CPU quantity as nanocores.
func parseCPU(s string) (int64, error) {
	v := strings.TrimSpace(s)
	scale := 1e9
	if rest, ok := strings.CutSuffix(v, "m"); ok {
		v, scale = rest, 1e6
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("resources.cpu %q: want cores (\"2\", \"0.5\") or millicores (\"500m\")", s)
	}
	n := int64(math.Round(f * scale))
	if n < 1e6 {
		return 0, fmt.Errorf("resources.cpu %q: less than 1m", s)
	}
	return n, nil
}

// memorySuffixes are the Kubernetes quantity suffixes, two-letter ones
// first so "Mi" is not read as "M".
var memorySuffixes = []struct {
	suffix string
	factor float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// minMemory is the smallest limit Docker accepts.
const minMemory = 6 << 20

// parseMemory reads a memory quantity as bytes.
func parseMemory(s string) (int64, error) {
	v := strings.TrimSpace(s)
	factor := 1.0
	for _, m := range memorySuffixes {
		if rest, ok := strings.CutSuffix(v, m.suffix); ok {
			v, factor = rest, m.factor
			break
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("resources.memory %q: want bytes or a quantity like \"256Mi\" or \"1Gi\"", s)
	}
	n := f * factor
	if n > math.MaxInt64/2 {
		return 0, fmt.Errorf("resources.memory %q: too large", s)
	}
	if n < minMemory {
		return 0, fmt.Errorf("resources.memory %q: Docker needs at least 6Mi", s)
	}
	return int64(n), nil
}
