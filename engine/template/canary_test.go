package template

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
)

// TestGonjaCanaries pins, one named case each, every behaviour of gonja the
// renderer depends on, so that a gonja upgrade that changes one fails here
// by name rather than somewhere downstream. Each case says what of ours
// rests on it.
func TestGonjaCanaries(t *testing.T) {
	vars := testVars()
	renders := []struct{ name, src, want string }{
		// Strict undefined (config.StrictUndefined) and `default` seeing it.
		{"default replaces an undefined variable", "{{ nope | default('d') }}", "d"},
		{"default replaces an undefined attribute", "{{ input.nope | default('d') }}", "d"},
		{"default keeps a defined falsy value", "[{{ input.off | default('d') }}]", "[false]"},
		// The filters the README and DESIGN document.
		{"filter upper", "{{ 'ab' | upper }}", "AB"},
		{"filter lower", "{{ 'AB' | lower }}", "ab"},
		{"filter join", "{{ ['a', 1] | join('-') }}", "a-1"},
		{"filter length", "{{ [1, 2, 3] | length }}", "3"},
		{"filter tojson", "{{ {'b': 1, 'a': 'x'} | tojson }}", `{"a":"x","b":1}`},
		{"filter json_encode", "{{ [true, none] | json_encode }}", `[true,null]`},
		{"filter trim", "[{{ '  x  ' | trim }}]", "[x]"},
		{"filter replace", "{{ 'a.b.c' | replace('.', '/') }}", "a/b/c"},
		{"filter with keyword arguments", "{{ {'a': 1} | tojson(indent=1) }}", "{\n \"a\": 1\n}"},
		// Jinja syntax our users write.
		{"if/elif/else", "{% if false %}a{% elif true %}b{% else %}c{% endif %}", "b"},
		{"for with loop.index", "{% for x in ['a', 'b'] %}{{ loop.index }}{{ x }}{% endfor %}", "1a2b"},
		{"inline if", "{{ 'y' if input.on else 'n' }}", "y"},
		{"string concatenation with ~", "{{ 'a' ~ 1 }}", "a1"},
		{"none literal", "{{ none is none }}", "true"},
		// No HTML escaping (config.AutoEscape off), trailing newline kept.
		{"no autoescape", "{{ '<&>' }}", "<&>"},
		{"keep trailing newline", "x\n", "x\n"},
		// Every {{ }} goes through our text filter, wherever gonja keeps
		// it: prepare reaches these bodies only by reflection.
		{"text filter in an if body", "{% if true %}{{ [true] }}{% endif %}", "[true]"},
		{"text filter in a for body", "{% for x in [1] %}{{ {'k': x} }}{% endfor %}", `{"k":1}`},
		{"text filter in a set block", "{% set s %}{{ false }}{% endset %}{{ s }}", "false"},
		{"text filter in a macro body", "{% macro m() %}{{ none }}|{% endmacro %}{{ m() }}", "|"},
		{"text filter in a call block", "{% macro m() %}{{ caller() }}{% endmacro %}{% call m() %}{{ true }}{% endcall %}", "true"},
		{"text filter in a with block", "{% with v = [1] %}{{ v }}{% endwith %}", "[1]"},
		{"text filter in a filter block", "{% filter upper %}{{ true }}{% endfilter %}", "TRUE"},
	}
	for _, c := range renders {
		t.Run("gonja: "+c.name, func(t *testing.T) {
			if got := render(t, c.src, vars); got != c.want {
				t.Errorf("Render(%q) = %q, want %q", c.src, got, c.want)
			}
		})
	}

	// The scope variables the engine passes, read by every spelling.
	for _, name := range []string{"input", "say_hello", "each", "hook", "secret", "secrets", "env"} {
		t.Run("gonja: scope variable "+name, func(t *testing.T) {
			got, err := mustParse(t, "{{ "+name+" }}").Eval(vars)
			if err != nil {
				t.Fatal(err)
			}
			if want := normal(vars[name]); !reflect.DeepEqual(got, want) {
				t.Errorf("{{ %s }} = %#v, want %#v", name, got, want)
			}
		})
	}

	t.Run("gonja: strict undefined names the variable", func(t *testing.T) {
		for _, src := range []string{"{{ nope }}", "{{ input.nope }}", "x {{ input.list[7] }}"} {
			_, err := mustParse(t, src).Render(vars)
			if err == nil {
				t.Errorf("Render(%q) succeeded; strict undefined must make it an error", src)
			}
		}
		_, err := mustParse(t, "{{ nope }}").Render(vars)
		if err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("error %v does not name the undefined variable", err)
		}
	})

	t.Run("gonja: raw value of a single expression", func(t *testing.T) {
		for _, c := range []struct {
			src  string
			want any
		}{
			{"{{ input.map }}", map[string]any{"a": "x", "b": 2}},
			{" {{ input.list }}\n", []any{1, "two", true}},
			{"{{ input.count }}", 3},
			{"{{ input.ratio }}", 2.5},
			{"{{ input.on }}", true},
			{"{{ input.none }}", nil},
			{"{{ 'x' if input.off }}", nil},
			{"{{ input.count }}{{ input.count }}", "33"},
		} {
			got, err := mustParse(t, c.src).Eval(vars)
			if err != nil {
				t.Fatalf("Eval(%q): %v", c.src, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Eval(%q) = %#v, want %#v", c.src, got, c.want)
			}
		}
	})

	// builtinFilterNames reads FilterSet's unexported map by reflection
	// (FilterSet has Exists, Get, Register, Replace and Update, but no
	// way to list): if the field moves, no built-in filter is left.
	t.Run("gonja: built-in filter names are readable", func(t *testing.T) {
		names := builtinFilterNames()
		for _, want := range []string{"upper", "lower", "default", "length", "replace", "first", "dictsort", "center"} {
			if !slices.Contains(names, want) {
				t.Errorf("built-in filter %q not found among %d names read from gonja's FilterSet", want, len(names))
			}
		}
	})

	// prepare detects `{% set obj.attr = ... %}` through the unexported
	// `target` field of SetControlStructure.
	t.Run("gonja: a set into an object is detected", func(t *testing.T) {
		if _, ok := reflect.TypeFor[controlstructures.SetControlStructure]().FieldByName("target"); !ok {
			t.Fatal("SetControlStructure has no field target: prepare cannot tell an assignment into an object")
		}
		if !mustParse(t, "{% set ns = namespace(a=1) %}{% set ns.a = 2 %}").assigns {
			t.Error("a set into an object was not detected")
		}
		if mustParse(t, "{% set a = 2 %}{{ a }}").assigns {
			t.Error("a plain set was taken for a set into an object")
		}
	})

	// tickLoop puts a tick first in every for body, through the exported
	// BodyWrapper and IfCondition that prepare reaches by reflection.
	t.Run("gonja: for bodies are ticked", func(t *testing.T) {
		tpl := mustParse(t, "{% if true %}{% for x in [1] %}{{ x }}{% endfor %}{% endif %}")
		var loops []*controlstructures.ForControlStructure
		findLoops(reflect.ValueOf(tpl.tpl.Root()), map[uintptr]bool{}, &loops)
		if len(loops) != 1 {
			t.Fatalf("found %d for loops in the prepared tree, want 1", len(loops))
		}
		first, ok := loops[0].BodyWrapper.Nodes[0].(*nodes.Output)
		if !ok {
			t.Fatalf("the for body starts with %T, want the tick's Output", loops[0].BodyWrapper.Nodes[0])
		}
		if fe, ok := first.Expression.(*nodes.FilteredExpression); !ok || fe.Filters[len(fe.Filters)-1].Name != tickFilter {
			t.Errorf("the for body's first output is not the tick: %#v", first.Expression)
		}
		ctx, cancel := context.WithTimeout(WithLimits(context.Background(), Limits{Time: 100 * time.Millisecond}), 100*time.Millisecond)
		defer cancel()
		_, err := mustParse(t, "{% if true %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}").RenderContext(ctx, vars)
		var le *LimitError
		if !errors.As(err, &le) || le.Key != "template_time" {
			t.Errorf("a nested loop inside an if ran past its time: %v", err)
		}
	})

	// guard replaces operators kept in unexported fields (a set's
	// expression), through the field's address.
	t.Run("gonja: operators in unexported fields are guarded", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(WithLimits(context.Background(), Limits{Time: time.Minute, Output: 1000}), time.Minute)
		defer cancel()
		_, err := mustParse(t, "{% set s = 'ab' * 100000 %}{{ s | length }}").RenderContext(ctx, vars)
		var le *LimitError
		if !errors.As(err, &le) || le.Key != "template_output" {
			t.Errorf("a product in a set's expression was not guarded: %v", err)
		}
	})
}

func mustParse(t *testing.T, src string) *Template {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return tpl
}

// normal is what Eval gives back for a variable: string maps become
// map[string]any.
func normal(v any) any {
	if m, ok := v.(map[string]string); ok {
		out := map[string]any{}
		for k, s := range m {
			out[k] = s
		}
		return out
	}
	return v
}

func findLoops(v reflect.Value, seen map[uintptr]bool, out *[]*controlstructures.ForControlStructure) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		if v.Type() == forType {
			*out = append(*out, (*controlstructures.ForControlStructure)(v.UnsafePointer()))
		}
		findLoops(v.Elem(), seen, out)
	case reflect.Interface:
		if !v.IsNil() {
			findLoops(v.Elem(), seen, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			findLoops(v.Field(i), seen, out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			findLoops(v.Index(i), seen, out)
		}
	}
}
