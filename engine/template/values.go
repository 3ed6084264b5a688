package template

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// maxDepth stops the value walkers on self-referencing data instead of
// overflowing the stack.
const maxDepth = 1000

// native converts a gonja value to the plain Go values the rest of the
// service uses: map[string]any, []any, int, float64, bool, string, nil.
func native(v *exec.Value) (any, error) {
	if v == nil || v.IsNil() {
		return nil, nil
	}
	if v.IsError() {
		return nil, v
	}
	return plain(v.Interface(), 0)
}

// plain converts x (possibly holding gonja's own types) to plain Go values.
// It always builds new maps and slices, so the caller never shares them.
func plain(x any, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxDepth)
	}
	switch t := x.(type) {
	case nil:
		return nil, nil
	case string:
		return t, nil
	case bool:
		return t, nil
	case int:
		return t, nil
	case float64:
		return t, nil
	case *exec.Value:
		if t == nil || t.IsNil() {
			return nil, nil
		}
		if t.IsError() {
			return nil, t
		}
		return plain(t.Interface(), depth+1)
	case *exec.Dict:
		if t == nil {
			return nil, nil
		}
		return plainDict(t.Pairs, depth)
	case exec.Dict:
		return plainDict(t.Pairs, depth)
	case error:
		return nil, t
	}

	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int(u), nil
		}
		return float64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return []any{}, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			item, err := plain(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = item
		}
		return out, nil
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			item, err := plain(iter.Value().Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[keyString(iter.Key())] = item
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return plain(rv.Elem().Interface(), depth+1)
	}
	// Functions, channels and other values a template can reach but data
	// cannot hold are shown the way gonja prints them.
	return exec.ToValue(x).String(), nil
}

func plainDict(pairs []*exec.Pair, depth int) (map[string]any, error) {
	out := make(map[string]any, len(pairs))
	for _, p := range pairs {
		if p == nil || p.Key == nil {
			continue
		}
		item, err := plain(p.Value, depth+1)
		if err != nil {
			return nil, err
		}
		out[p.Key.String()] = item
	}
	return out, nil
}

func keyString(k reflect.Value) string {
	if k.Kind() == reflect.Interface {
		k = k.Elem()
	}
	if k.Kind() == reflect.String {
		return k.String()
	}
	if !k.IsValid() {
		return "null"
	}
	return fmt.Sprint(k.Interface())
}

// Truthy applies the spec's `when` rule to an evaluated value. Strings are
// false when, trimmed, they are empty or (case-insensitively) "false", "0",
// "null" or "none". nil, false, numeric zero and empty maps and lists are
// false. Everything else is true.
func Truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "", "false", "0", "null", "none":
			return false
		}
		return true
	case bool:
		return t
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() != 0
	case reflect.Map, reflect.Slice, reflect.Array:
		return rv.Len() > 0
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return false
		}
		return Truthy(rv.Elem().Interface())
	case reflect.String:
		return Truthy(rv.String())
	case reflect.Bool:
		return rv.Bool()
	}
	return true
}

// deepCopy copies the maps and slices of vars, so a template that assigns
// into its variables (`{% set ns.x = 1 %}`) changes only its own copy.
func deepCopy(x any, depth int) any {
	if depth > maxDepth {
		return x
	}
	switch t := x.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[k] = deepCopy(v, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = deepCopy(v, depth+1)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(t))
		for k, v := range t {
			out[k] = v
		}
		return out
	case []string:
		return append([]string(nil), t...)
	}
	return x
}
