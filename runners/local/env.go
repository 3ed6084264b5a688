package local

import (
	"fmt"
	"strings"

	"github.com/appliance-sh/appliance/engine/template/quote"
)

// maxEnvString is the most one environment string (NAME=value and its
// NUL) may hold on Linux: MAX_ARG_STRLEN, 32 pages of 4 KiB. exec refuses
// a longer one with E2BIG.
const maxEnvString = 128 << 10

// tooBig explains err, an exec that failed with E2BIG, naming the inputs
// (and env variables) over the limit, so the author knows which value to
// pass another way.
func tooBig(input map[string]any, env []string, err error) error {
	inputOf := make(map[string]string, len(input))
	for k := range input {
		inputOf[quote.InputEnvName(k)] = k
	}
	var over []string
	for _, e := range env {
		if len(e)+1 <= maxEnvString {
			continue
		}
		name, _, _ := strings.Cut(e, "=")
		if k, ok := inputOf[name]; ok {
			over = append(over, fmt.Sprintf("input %q (%s, %d KiB)", k, name, len(e)>>10))
		} else {
			over = append(over, fmt.Sprintf("env %s (%d KiB)", name, len(e)>>10))
		}
	}
	if len(over) == 0 {
		return fmt.Errorf("%w: the step's environment and arguments together are over the system's limit (a quarter of `ulimit -s`): "+
			"pass big values in files, with their paths as the inputs", err)
	}
	return fmt.Errorf("%w: %s over 128 KiB, the most one environment variable may hold on Linux (every input is one, INPUT_<NAME>): "+
		"pass a value that big in a file, with its path as the input", err, strings.Join(over, ", "))
}

// prependPath adds dir in front of the list variable name (PYTHONPATH,
// NODE_PATH) in env, keeping what was there.
func prependPath(env []string, name, dir string) []string {
	prefix := name + "="
	for i := len(env) - 1; i >= 0; i-- {
		if old, ok := strings.CutPrefix(env[i], prefix); ok && old != "" {
			return append(env, prefix+dir+":"+old)
		}
	}
	return append(env, prefix+dir)
}
