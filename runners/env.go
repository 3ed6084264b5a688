package runners

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/appliance-sh/appliance/engine/template/quote"
)

// inputEnv renders a step's input as INPUT_ variables: strings as they are,
// any other value as JSON; a null input (an optional one nobody gave) is
// left unset, so `${INPUT_X:-fallback}` works. Sorted so the environment
// is deterministic.
func inputEnv(input map[string]any) ([]string, error) {
	keys := make([]string, 0, len(input))
	for k := range input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		if input[k] == nil {
			continue
		}
		v, ok := input[k].(string)
		if !ok {
			raw, err := json.Marshal(input[k])
			if err != nil {
				return nil, fmt.Errorf("encode input %q: %w", k, err)
			}
			v = string(raw)
		}
		env = append(env, quote.InputEnvName(k)+"="+v)
	}
	return env, nil
}

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

// containerEnv is what a step's container (docker or pod) is given: its
// input as JSON (the file $APPLIANCE_INPUT names, at containerInput) and
// its environment: INPUT_ variables, the action's env, then the
// APPLIANCE_ variables naming the step.
func containerEnv(step *Step) (inputJSON []byte, env []string, err error) {
	input := step.Input
	if input == nil {
		input = map[string]any{}
	}
	if inputJSON, err = json.Marshal(input); err != nil {
		return nil, nil, fmt.Errorf("encode input: %w", err)
	}
	if env, err = inputEnv(step.Input); err != nil {
		return nil, nil, err
	}
	env = append(env, mapEnv(step.Action.Env)...)
	env = append(env,
		"APPLIANCE_INPUT="+containerInput,
		"APPLIANCE_JOB_ID="+step.JobID,
		"APPLIANCE_STEP="+step.Name,
		"APPLIANCE_WORKSPACE="+step.Workspace,
	)
	return inputJSON, env, nil
}

// mapEnv renders an env map as KEY=value entries, sorted.
func mapEnv(m map[string]string) []string {
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
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
