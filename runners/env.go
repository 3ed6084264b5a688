package runners

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/appliance-sh/appliance/engine/template/quote"
)

// InputEnv renders a step's input as INPUT_ variables: strings as they are,
// any other value as JSON; a null input (an optional one nobody gave) is
// left unset, so `${INPUT_X:-fallback}` works. Sorted so the environment
// is deterministic.
func InputEnv(input map[string]any) ([]string, error) {
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

// MapEnv renders an env map as KEY=value entries, sorted.
func MapEnv(m map[string]string) []string {
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}
