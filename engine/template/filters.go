package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// textFilter is applied to every {{ }} of a rendered template (see
// wrapOutputs): it turns the value into the text our users expect in shell
// scripts rather than Python's repr.
const textFilter = "__appliance_text"

// extraFilters are added to, or replace, gonja's built-in filters.
func extraFilters() map[string]exec.FilterFunction {
	return map[string]exec.FilterFunction{
		textFilter:    filterText,
		"tojson":      filterToJSON,
		"json_encode": filterToJSON,
		"fromjson":    filterFromJSON,
		"join":        filterJoin,
		"trim":        filterTrim,
		"raw":         filterRaw,
	}
}

// keepErrors makes a filter pass an error value (an undefined variable)
// through untouched, so the error that reaches the user names the variable
// rather than the filter that choked on it. `default` is the exception: it
// exists to replace undefined values.
func keepErrors(fn exec.FilterFunction) exec.FilterFunction {
	return func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
		if in.IsError() {
			return in
		}
		return fn(e, in, params)
	}
}

// builtinFilterNames lists gonja's built-in filters. FilterSet has no
// listing method (only Exists, Get, Register, Replace and Update), and
// builtins keeps its map literal unexported, so the names are read from the
// set's map by reflection; TestGonjaCanaries fails by name if that breaks.
func builtinFilterNames() []string {
	m := reflect.ValueOf(builtins.Filters).Elem().FieldByName("filters")
	if m.Kind() != reflect.Map {
		return nil
	}
	names := make([]string, 0, m.Len())
	iter := m.MapRange()
	for iter.Next() {
		names = append(names, iter.Key().String())
	}
	return names
}

func invalidCall(format string, args ...any) *exec.Value {
	return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf(format, args...)))
}

func filterText(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	r, isRaw := in.Interface().(rawText)
	x, err := native(in)
	if err != nil {
		return exec.AsValue(err)
	}
	s, err := valuetext.Text(x)
	if err != nil {
		return exec.AsValue(err)
	}
	// Every {{ }} counts, also in macro and set block bodies, which gonja
	// builds in buffers of its own that the render's writer never sees.
	if b := budgetOf(e); b != nil {
		if err := b.build(len(s)); err != nil {
			return exec.AsValue(err)
		}
		// In a script, the value's place gets a sentinel that the
		// script's language then replaces with the value quoted for
		// where it stands; `raw` opts out.
		if b.marks != nil && !isRaw && len(params.Args) == 1 && params.Args[0].IsInteger() {
			return exec.AsSafeValue(b.marks.add(params.Args[0].Integer(), x))
		}
	}
	if isRaw {
		return exec.AsSafeValue(string(r))
	}
	return exec.AsSafeValue(s)
}

// rawText is a value `raw` let through: a script gets it as written,
// never quoted.
type rawText string

// filterRaw marks a value to go into a script as written, code and all;
// it must be the last filter (any later one makes plain text again).
func filterRaw(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	x, err := native(in)
	if err != nil {
		return exec.AsValue(err)
	}
	s, err := valuetext.Text(x)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(rawText(s))
}

// filterToJSON writes compact JSON with sorted keys and no HTML escaping;
// `indent=N` pretty-prints.
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	var indent *exec.Value
	if err := params.Take(exec.KeywordArgument("indent", exec.AsValue(nil), captureValue(&indent))); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	prefix := ""
	if !indent.IsNil() {
		if !indent.IsInteger() || indent.Integer() < 0 || indent.Integer() > 16 {
			return invalidCall("indent must be an integer from 0 to 16")
		}
		prefix = strings.Repeat(" ", indent.Integer())
	}
	x, err := native(in)
	if err != nil {
		return exec.AsValue(err)
	}
	s, err := valuetext.JSON(x, prefix)
	if err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(s)
}

func filterFromJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if err := params.Take(); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	if !in.IsString() {
		return in // already structured: fromjson on an object is a no-op
	}
	var out any
	if err := json.Unmarshal([]byte(in.String()), &out); err != nil {
		return exec.AsValue(fmt.Errorf("fromjson: %w", err))
	}
	return exec.AsValue(out)
}

// filterJoin joins like Jinja's join, but writes items the way they read in
// text (true, 3, {"a":1}) rather than as Python reprs.
func filterJoin(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if _, byAttribute := params.KwArgs["attribute"]; byAttribute {
		if fn, ok := builtins.Filters.Get("join"); ok {
			return fn(e, in, params)
		}
	}
	var sep *exec.Value
	if err := params.Take(exec.KeywordArgument("d", exec.AsValue(""), captureValue(&sep))); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	x, err := native(in)
	if err != nil {
		return exec.AsValue(err)
	}
	var items []any
	switch t := x.(type) {
	case []any:
		items = t
	case string:
		for _, r := range t {
			items = append(items, string(r))
		}
	default:
		return invalidCall("join needs a list, got %s", in.String())
	}
	parts := make([]string, len(items))
	size := 0
	for i, item := range items {
		if parts[i], err = valuetext.Text(item); err != nil {
			return exec.AsValue(err)
		}
		size += len(parts[i]) + len(sep.String())
	}
	// Check before joining: many large items make one huge string.
	if b := budgetOf(e); b != nil {
		if err := b.fits(size); err != nil {
			return exec.AsValue(err)
		}
	}
	return exec.AsValue(strings.Join(parts, sep.String()))
}

// filterTrim trims any value's text, not only strings: `{{ 5 | trim }}` is "5".
func filterTrim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	var chars *exec.Value
	if err := params.Take(exec.KeywordArgument("chars", exec.AsValue(nil), captureValue(&chars))); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(err))
	}
	x, err := native(in)
	if err != nil {
		return exec.AsValue(err)
	}
	s, err := valuetext.Text(x)
	if err != nil {
		return exec.AsValue(err)
	}
	if chars.IsNil() {
		return exec.AsValue(strings.TrimSpace(s))
	}
	return exec.AsValue(strings.Trim(s, chars.String()))
}

func captureValue(dst **exec.Value) exec.ArgumentTransmuter {
	return func(v *exec.Value) error {
		if v == nil {
			return errors.New("missing value")
		}
		*dst = v
		return nil
	}
}
