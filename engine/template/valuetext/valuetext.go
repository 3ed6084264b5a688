// Package valuetext is how a plain template value (string, bool, int,
// float64, nil, []any, map[string]any) reads as text: one definition for
// the template engine's output and for the script quoting, which must
// put a value inside a string literal exactly as a template prints it.
// It sits apart from both because the quoting package cannot import the
// template package (the template package imports it).
// It must not import engine, engine/workflow or engine/workspace.
package valuetext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Text is how a value reads inside rendered text: strings as they are,
// numbers as JSON writes them, booleans as true/false, nil as nothing, and
// maps and lists as compact JSON.
func Text(x any) (string, error) {
	switch t := x.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case int:
		return strconv.Itoa(t), nil
	case float64:
		return Float(t), nil
	}
	return JSON(x, "")
}

// JSON encodes x (already plain) without HTML escaping: the output goes
// into scripts and JSON bodies, never into a web page. indent pretty-prints.
func JSON(x any, indent string) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(jsonSafe(x)); err != nil {
		return "", fmt.Errorf("encode json: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// jsonSafe replaces the floats JSON cannot hold (NaN, ±Inf) with null, so
// that encoding a plain value never fails.
func jsonSafe(x any) any {
	switch t := x.(type) {
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return nil
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[k] = jsonSafe(v)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = jsonSafe(v)
		}
		return out
	}
	return x
}

// Float writes integral floats without a fraction ("3", not "3.0"):
// JSON numbers decode to float64, and `count: 3` must render as 3.
func Float(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}
