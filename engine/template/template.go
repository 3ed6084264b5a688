// Package template renders the workflow format's {{ }} expressions (Jinja
// syntax, strict undefined) and evaluates `when` conditions.
//
// It is gonja v2 with these choices:
//   - Undefined variables, attributes and items are errors, except under
//     `default`: `{{ input.nope | default("x") }}` is "x".
//   - Nothing is HTML-escaped, and the source's trailing newline is kept
//     (scripts are templates). CRLF line ends become LF.
//   - In text, values read the way shell users expect rather than as Python
//     reprs: booleans are true/false, nil is the empty string, integral
//     numbers have no fraction (3, not 3.0), and maps and lists are compact
//     JSON with sorted keys (what `tojson` gives): `{"a":1}`.
//   - A template that is exactly one {{ expression }} (whitespace around it
//     allowed) evaluates, through Eval, to the expression's native value:
//     map[string]any, []any, int, float64, bool, string or nil.
//   - Templates cannot read files (include, import, extends are absent) and
//     cannot change their variables: methods that mutate (append, update,
//     pop...) are absent, and a template assigning into an object renders on
//     a copy of its variables.
//   - Filters added to gonja's: tojson (json_encode), fromjson, join and
//     trim that write values as text does, and raw, which lets a value into
//     a script as written (see RenderScript).
//   - A script renders through RenderScript: each {{ }} value is quoted as
//     data for the place it stands in (package quote).
//
// It must not import engine, engine/workflow or engine/workspace.
package template

import (
	"context"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// Template is a parsed template, safe for concurrent rendering.
type Template struct {
	src string
	tpl *exec.Template
	// raw is a copy of the only {{ }} of a single-expression template, taken
	// before prepare rewrote it for text; nil otherwise.
	raw *nodes.Output
	// assigns is set when the template assigns into objects, so it renders
	// on a copy of its variables.
	assigns bool
}

// compile reads src into gonja's tree, for Parse and References alike:
// text gonja's lexer would hang on is refused first (see lexTrap), and a
// panic in gonja is an error.
func compile(src string) (tpl *exec.Template, err error) {
	defer recoverError(src, &err)
	if at := lexTrap(src); at >= 0 {
		return nil, lexTrapError(src, at)
	}
	if tpl, err = exec.NewTemplate(rootID, gonjaConfig, rootLoader{src: src}, environment); err != nil {
		return nil, parseError(src, err)
	}
	return tpl, nil
}

// Parse parses src once; render it many times.
func Parse(src string) (t *Template, err error) {
	defer recoverError(src, &err)
	tpl, err := compile(src)
	if err != nil {
		return nil, err
	}
	t = &Template{src: src, tpl: tpl}
	if o := singleOutput(tpl.Root()); o != nil {
		raw := *o
		t.raw = &raw
	}
	t.assigns = prepare(tpl.Root())
	if t.raw != nil {
		// The copy shares the tree prepare guarded, but not its top.
		for _, e := range []*nodes.Expression{&t.raw.Expression, &t.raw.Condition, &t.raw.Alternative} {
			if g := guard(*e); g != nil {
				*e = g
			}
		}
	}
	return t, nil
}

// Render renders the template to text with vars as its variables.
// An undefined variable is an error.
func (t *Template) Render(vars map[string]any) (string, error) {
	return t.RenderContext(context.Background(), vars)
}

// RenderContext is Render bound by the Limits ctx carries (see WithLimits)
// and by ctx's deadline: past either, it fails with a *LimitError.
func (t *Template) RenderContext(ctx context.Context, vars map[string]any) (out string, err error) {
	defer recoverError(t.src, &err)
	b := newBudget(ctx)
	w := &limitedWriter{b: b}
	if err := t.tpl.Execute(w, t.context(vars, b)); err != nil || b.tripped != nil {
		return "", b.failure(t.src, err)
	}
	return w.buf.String(), nil
}

// Eval renders like Render, except that a template that is exactly one
// `{{ expression }}` yields the expression's native value (map, slice,
// number, bool, nil) rather than its text.
func (t *Template) Eval(vars map[string]any) (any, error) {
	return t.EvalContext(context.Background(), vars)
}

// EvalContext is Eval bound as RenderContext is.
func (t *Template) EvalContext(ctx context.Context, vars map[string]any) (v any, err error) {
	if t.raw == nil {
		return t.RenderContext(ctx, vars)
	}
	defer recoverError(t.src, &err)
	b := newBudget(ctx)
	e := &exec.Evaluator{
		Config: gonjaConfig,
		Environment: &exec.Environment{
			Context:           environment.Context.Inherit().Update(t.context(vars, b)),
			Filters:           environment.Filters,
			Tests:             environment.Tests,
			ControlStructures: environment.ControlStructures,
			Methods:           environment.Methods,
		},
		Loader: rootLoader{src: t.src},
	}
	value, err := evalOutput(e, t.raw)
	if err == nil {
		err = b.value(value)
	}
	if err != nil || b.tripped != nil {
		return nil, b.failure(t.src, err)
	}
	if v, err = native(value); err != nil {
		return nil, b.failure(t.src, err)
	}
	return v, nil
}

// evalOutput evaluates `{{ x }}`, `{{ x if c }}` and `{{ x if c else y }}`
// as gonja's renderer does; a false condition without else yields nil.
func evalOutput(e *exec.Evaluator, o *nodes.Output) (*exec.Value, error) {
	if o.Condition != nil {
		cond := e.Eval(o.Condition)
		if cond.IsError() {
			return nil, cond
		}
		if cond.IsNil() || !cond.IsTrue() {
			if o.Alternative == nil {
				return exec.AsValue(nil), nil
			}
			return checked(e.Eval(o.Alternative))
		}
	}
	return checked(e.Eval(o.Expression))
}

func checked(v *exec.Value) (*exec.Value, error) {
	if v.IsError() {
		return nil, v
	}
	return v, nil
}

// context is the render's variables plus its budget, in a map of its own:
// the caller's map is never changed.
func (t *Template) context(vars map[string]any, b *budget) *exec.Context {
	b.vars = vars
	if t.assigns {
		vars = deepCopy(vars, 0).(map[string]any)
	}
	data := make(map[string]any, len(vars)+1)
	for k, v := range vars {
		data[k] = v
	}
	data[budgetVar] = b
	return exec.NewContext(data)
}

// IsTemplate reports whether s contains template syntax at all; plain
// strings need no parsing or rendering. A comment opener counts only when a
// closer follows: shell's `${#array[@]}` alone leaves a script plain.
func IsTemplate(s string) bool {
	if strings.Contains(s, "{{") || strings.Contains(s, "{%") {
		return true
	}
	open := strings.Index(s, "{#")
	return open >= 0 && strings.Contains(s[open+2:], "#}")
}
