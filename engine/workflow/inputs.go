package workflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// ErrInvalidInput is wrapped by every error ResolveInput returns: the input
// submitted does not fit the definitions (a 400 for the API).
var ErrInvalidInput = errors.New("invalid input")

// Primitive input types; any other type names a connection type.
const (
	InputString   = "string"
	InputText     = "text"
	InputInteger  = "integer"
	InputNumber   = "number"
	InputBoolean  = "boolean"
	InputDate     = "date"
	InputDatetime = "datetime"
)

// maxSafeInteger is the largest integer a float64 (a JSON number) holds exactly.
const maxSafeInteger = 1 << 53

// datetimeLayouts are the accepted `datetime` forms: minutes, optional
// seconds (with optional fraction), optional zone.
var datetimeLayouts = []string{
	"2006-01-02T15:04",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05",
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04:05.999999999Z07:00",
}

// InputError lists every field of a submitted input that does not fit its
// definition, in the definitions' order.
type InputError struct {
	Problems []string // each names its field: `input "count": expected integer, got "abc"`
}

func (e *InputError) Error() string { return strings.Join(e.Problems, "; ") }

// Unwrap makes errors.Is(err, ErrInvalidInput) hold.
func (e *InputError) Unwrap() error { return ErrInvalidInput }

// ResolveInput applies input definitions to a submitted input: defaults
// (string defaults rendered with `secret.*`), required fields, options,
// type coercion and connection resolution. Errors name the field. Keys not
// defined pass through unchanged. The result is a new map; given is not
// changed. A nil given (or value) counts as not given, and so does a blank
// string for a field whose type is not a string: that is what a form sends
// for a field left empty.
func (ws *Workspace) ResolveInput(defs *Inputs, given map[string]any) (map[string]any, error) {
	return ws.ResolveInputContext(context.Background(), defs, given)
}

// ResolveInputContext is ResolveInput with string defaults rendered under
// ctx (see template.WithLimits).
func (ws *Workspace) ResolveInputContext(ctx context.Context, defs *Inputs, given map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(given))
	for k, v := range given {
		out[k] = v
	}
	if defs == nil {
		return out, nil
	}
	var problems []string
	for _, name := range fieldOrder(defs) {
		f := defs.Fields[name]
		if f == nil {
			continue
		}
		v, err := ws.resolveField(ctx, f, given[name])
		if err != nil {
			problems = append(problems, fmt.Sprintf("input %q: %s", name, err))
			continue
		}
		// An optional input nobody gave and without a default is null,
		// never undefined: `{{ input.x }}` and `{% if input.x %}` work.
		out[name] = v
	}
	if len(problems) > 0 {
		return nil, &InputError{Problems: problems}
	}
	return out, nil
}

// CheckInputKeys rejects keys of given that defs does not declare, one
// problem per key: `input "nmae": unknown (declared: name, seconds)`. What a
// person sends (the execute endpoint, the CLI, an approval) is checked, so
// a typo is not silently ignored; input the server builds itself (webhooks,
// triggers, hooks, child jobs) is not.
func CheckInputKeys(defs *Inputs, given map[string]any) error {
	var declared []string
	if defs != nil {
		declared = fieldOrder(defs)
	}
	known := make(map[string]bool, len(declared))
	for _, name := range declared {
		known[name] = true
	}
	var unknown []string
	for k := range given {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	list := "none"
	if len(declared) > 0 {
		list = strings.Join(declared, ", ")
	}
	problems := make([]string, len(unknown))
	for i, k := range unknown {
		problems[i] = fmt.Sprintf("input %q: unknown (declared: %s)", k, list)
	}
	return &InputError{Problems: problems}
}

// fieldOrder is defs.Order, then any field it misses in key order, so
// errors always come in the same order.
func fieldOrder(defs *Inputs) []string {
	seen := make(map[string]bool, len(defs.Fields))
	names := make([]string, 0, len(defs.Fields))
	for _, name := range defs.Order {
		if _, ok := defs.Fields[name]; ok && !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	var rest []string
	for name := range defs.Fields {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(names, rest...)
}

// resolveField returns the field's value, or nil when it has none and needs none.
func (ws *Workspace) resolveField(ctx context.Context, f *InputField, v any) (any, error) {
	rendered := false // v is a template default's value, which may hold a secret
	if isBlank(f.Type, v) {
		switch {
		case f.Default != nil:
			d, err := ws.inputDefault(ctx, f.Default)
			if err != nil {
				return nil, fmt.Errorf("default: %w", err)
			}
			s, isString := f.Default.(string)
			v, rendered = d, isString && template.IsTemplate(s)
		case f.Required:
			return nil, errors.New("required")
		default:
			return nil, nil
		}
	}
	v, err := ws.coerce(f.Type, v)
	if err == nil && len(f.Options) > 0 && !f.AllowCustom {
		err = CheckOption(v, f.Options)
	}
	if err != nil && rendered {
		// The message would quote the rendered value: name the template.
		return nil, fmt.Errorf("default %q rendered to a value that is not a valid %s", f.Default, f.Type)
	}
	return v, err
}

func isBlank(typ string, v any) bool {
	if v == nil {
		return true
	}
	s, ok := v.(string)
	return ok && typ != InputString && typ != InputText && strings.TrimSpace(s) == ""
}

// RendersDefaults reports whether resolving an input against defs renders
// a template (a string default with template syntax).
func RendersDefaults(defs *Inputs) bool {
	if defs == nil {
		return false
	}
	for _, f := range defs.Fields {
		if f == nil {
			continue
		}
		if s, ok := f.Default.(string); ok && template.IsTemplate(s) {
			return true
		}
	}
	return false
}

// inputDefault renders a string default with the workspace's secrets and
// copies any other default, so a job never shares the workspace's values.
func (ws *Workspace) inputDefault(ctx context.Context, d any) (any, error) {
	s, ok := d.(string)
	if !ok {
		return copyValue(d), nil
	}
	vars := map[string]any{"secret": ws.Secrets, "secrets": ws.Secrets}
	return ws.Templates.EvalContext(ctx, s, vars) // a nil Set parses without caching
}

func (ws *Workspace) coerce(typ string, v any) (any, error) {
	switch typ {
	case InputString, InputText:
		return toString(v)
	case InputInteger:
		return toInteger(v)
	case InputNumber:
		return toNumber(v)
	case InputBoolean:
		return toBoolean(v)
	case InputDate:
		return toDate(v)
	case InputDatetime:
		return toDatetime(v)
	}
	if _, ok := ws.ConnectionTypes[typ]; ok {
		return ws.toConnection(typ, v)
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

func toString(v any) (any, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(t), 'f', -1, 32), nil
	}
	if i, ok := asInt64(v); ok {
		return strconv.FormatInt(i, 10), nil
	}
	return nil, expected(InputString, v)
}

func toInteger(v any) (any, error) {
	if i, ok := asInt64(v); ok {
		return i, nil
	}
	var f float64
	switch t := v.(type) {
	case float64:
		f = t
	case float32:
		f = float64(t)
	case string:
		s := strings.TrimSpace(t)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		parsed, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, expected(InputInteger, v)
		}
		f = parsed
	default:
		return nil, expected(InputInteger, v)
	}
	if f != math.Trunc(f) || math.Abs(f) > maxSafeInteger {
		return nil, expected(InputInteger, v)
	}
	return int64(f), nil
}

func toNumber(v any) (any, error) {
	if i, ok := asInt64(v); ok {
		return float64(i), nil
	}
	var f float64
	switch t := v.(type) {
	case float64:
		f = t
	case float32:
		f = float64(t)
	case string:
		parsed, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil {
			return nil, expected(InputNumber, v)
		}
		f = parsed
	default:
		return nil, expected(InputNumber, v)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, expected(InputNumber, v)
	}
	return f, nil
}

func toBoolean(v any) (any, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return nil, expected(InputBoolean, v)
}

func toDate(v any) (any, error) {
	switch t := v.(type) {
	case time.Time:
		return t.Format(time.DateOnly), nil
	case string:
		s := strings.TrimSpace(t)
		if _, err := time.Parse(time.DateOnly, s); err == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("expected date (YYYY-MM-DD), got %s", describe(v))
}

func toDatetime(v any) (any, error) {
	switch t := v.(type) {
	case time.Time:
		return t.Format(time.RFC3339Nano), nil
	case string:
		s := strings.TrimSpace(t)
		for _, layout := range datetimeLayouts {
			if _, err := time.Parse(layout, s); err == nil {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("expected datetime (YYYY-MM-DDTHH:MM[:SS][zone]), got %s", describe(v))
}

// toConnection replaces a connection's name with its values plus `name`. A
// value already resolved (a map with `name`) resolves again from its name,
// so resolving twice gives the same result.
func (ws *Workspace) toConnection(typ string, v any) (any, error) {
	name, ok := v.(string)
	if m, isMap := v.(map[string]any); isMap {
		name, ok = m["name"].(string)
	}
	if !ok {
		return nil, fmt.Errorf("expected the name of a %s connection, got %s", typ, describe(v))
	}
	conn := ws.Connections[name]
	if conn == nil {
		return nil, fmt.Errorf("unknown connection %q", name)
	}
	if conn.Type != typ {
		return nil, fmt.Errorf("connection %q is of type %q, not %q", name, conn.Type, typ)
	}
	out := make(map[string]any, len(conn.Values)+1)
	for k, val := range conn.Values {
		out[k] = copyValue(val)
	}
	out["name"] = name
	return out, nil
}

// CheckOption refuses a value that is not one of options, saying which
// it is and what the options are.
func CheckOption(v any, options []string) error {
	s, err := toString(v)
	if err != nil {
		return fmt.Errorf("%s is not one of the options", describe(v))
	}
	for _, o := range options {
		if o == s {
			return nil
		}
	}
	quoted := make([]string, len(options))
	for i, o := range options {
		quoted[i] = strconv.Quote(o)
	}
	return fmt.Errorf("%s is not one of %s", describe(v), strings.Join(quoted, ", "))
}

// asInt64 reports v's value when v is any Go integer that fits an int64.
func asInt64(v any) (int64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), true
		}
	}
	return 0, false
}

func expected(typ string, v any) error {
	return fmt.Errorf("expected %s, got %s", typ, describe(v))
}

// describe shows a submitted value in an error: strings quoted, numbers
// and booleans as they are, structures by their kind only.
func describe(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case bool, float64, float32:
		return fmt.Sprint(t)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	if i, ok := asInt64(v); ok {
		return strconv.FormatInt(i, 10)
	}
	return fmt.Sprintf("a %T", v)
}

// copyValue copies the maps and slices of a value decoded from YAML or JSON.
func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, item := range t {
			out[k] = copyValue(item)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			out[i] = copyValue(item)
		}
		return out
	}
	return v
}
