package template

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
)

// testVars is the variable map of a step's scope: the job input, an
// upstream output (of step "say-hello", seen as say_hello), for_each,
// hook, secrets and env.
func testVars() map[string]any {
	return map[string]any{
		"input": map[string]any{
			"name":  "world",
			"count": 3,
			"whole": 3.0,
			"ratio": 2.5,
			"on":    true,
			"off":   false,
			"none":  nil,
			"empty": "",
			"list":  []any{1, "two", true},
			"map":   map[string]any{"b": 2, "a": "x"},
			"html":  `<a href="x">&'</a>`,
		},
		"say_hello": map[string]any{"output": map[string]any{"greeting": "hi", "items": []any{"a", "b"}}},
		"each":      map[string]any{"item": "pear", "index": 2},
		"hook":      map[string]any{"status": "failed", "is_success": false, "error_message": nil},
		"secret":    map[string]string{"TOKEN": "s3cr3t"},
		"secrets":   map[string]string{"TOKEN": "s3cr3t"},
		"env":       map[string]any{"HOME": "/root"},
	}
}

func render(t *testing.T, src string, vars map[string]any) string {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	out, err := tpl.Render(vars)
	if err != nil {
		t.Fatalf("Render(%q): %v", src, err)
	}
	return out
}

func TestRenderWritesTemplatesAsText(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"plain text unchanged", "echo hello", "echo hello"},
		{"variable", "echo {{ input.name }}", "echo world"},
		{"hyphenated step by its underscore name", "{{ say_hello.output.greeting }}", "hi"},
		{"for_each item and index", "{{ each.index }}:{{ each.item }}", "2:pear"},
		{"hook context", "{{ hook.status }}/{{ hook.is_success }}", "failed/false"},
		{"secret and secrets spellings", "{{ secret.TOKEN }}={{ secrets.TOKEN }}", "s3cr3t=s3cr3t"},
		{"env", "{{ env.HOME }}", "/root"},
		{"item access with brackets", "{{ input['name'] }} {{ input.list[1] }}", "world two"},
		{"if true branch", "{% if input.on %}yes{% else %}no{% endif %}", "yes"},
		{"if false branch", "{% if input.off %}yes{% else %}no{% endif %}", "no"},
		{"elif", "{% if input.off %}a{% elif input.count > 2 %}b{% else %}c{% endif %}", "b"},
		{"for loop", "{% for x in input.list %}{{ loop.index0 }}={{ x }};{% endfor %}", "0=1;1=two;2=true;"},
		{"for over map items", "{% for k, v in input.map | dictsort %}{{ k }}{{ v }}{% endfor %}", "ax" + "b2"},
		{"inline if", "{{ 'on' if input.on else 'off' }}", "on"},
		{"comment dropped", "a{# note #}b", "ab"},
		{"raw block kept verbatim", "{% raw %}{{ input.name }}{% endraw %}", "{{ input.name }}"},
		{"no HTML escaping", "{{ input.html }}", `<a href="x">&'</a>`},
		{"trailing newline kept", "echo {{ input.name }}\n", "echo world\n"},
		{"two trailing newlines kept", "echo\n\n", "echo\n\n"},
		{"no trailing newline added", "echo", "echo"},
		{"newline after a block kept", "{% if input.on %}\nx\n{% endif %}\n", "\nx\n\n"},
		{"boolean true as true", "{{ input.on }}", "true"},
		{"boolean false as false", "{{ input.off }}", "false"},
		{"computed boolean as true", "{{ input.count == 3 }}", "true"},
		{"nil as empty", "[{{ input.none }}]", "[]"},
		{"integer", "{{ input.count }}", "3"},
		{"integral float without fraction", "{{ input.whole }}", "3"},
		{"float", "{{ input.ratio }}", "2.5"},
		{"division", "{{ input.count / 2 }}", "1.5"},
		{"map as sorted compact JSON", "echo '{{ input.map }}'", `echo '{"a":"x","b":2}'`},
		{"list as JSON", "{{ input.list }}", `[1,"two",true]`},
		{"output object as JSON", "{{ say_hello.output }}", `{"greeting":"hi","items":["a","b"]}`},
		{"boolean inside if body", "{% if input.on %}{{ input.off }}{% endif %}", "false"},
		{"boolean inside for body", "{% for x in [input.on] %}{{ x }}{% endfor %}", "true"},
		{"boolean inside set block", "{% set x %}{{ input.on }}{% endset %}{{ x }}", "true"},
		{"boolean inside macro", "{% macro m(v) %}{{ v }}{% endmacro %}{{ m(input.off) }}", "false"},
		{"boolean inside filter block", "{% filter upper %}{{ input.on }}{% endfilter %}", "TRUE"},
		{"set then use", "{% set greeting = 'hello ' ~ input.name %}{{ greeting }}", "hello world"},
		{"namespace assignment in a loop", "{% set ns = namespace(n=0) %}{% for x in input.list %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "3"},
		{"range", "{% for i in range(3) %}{{ i }}{% endfor %}", "012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, tt.src, testVars()); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestEvalYieldsNativeValueOfASingleExpression(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want any
	}{
		{"object", "{{ say_hello.output }}", map[string]any{"greeting": "hi", "items": []any{"a", "b"}}},
		{"list", "{{ input.list }}", []any{1, "two", true}},
		{"integer", "{{ input.count }}", 3},
		{"float", "{{ input.ratio }}", 2.5},
		{"boolean", "{{ input.on }}", true},
		{"nil", "{{ input.none }}", nil},
		{"string", "{{ input.name }}", "world"},
		{"whitespace around allowed", "  {{ input.count }}\n", 3},
		{"comment around allowed", "{# n #}{{ input.count }}", 3},
		{"filter result", "{{ input.list | length }}", 3},
		{"list literal", "{{ [1, 'a', none] }}", []any{1, "a", nil}},
		{"dict literal", "{{ {'k': [input.count]} }}", map[string]any{"k": []any{3}}},
		{"comparison", "{{ input.count > 2 }}", true},
		{"inline if", "{{ input.list if input.on else [] }}", []any{1, "two", true}},
		{"inline if without else when false", "{{ input.list if input.off }}", nil},
		{"default on undefined", "{{ input.nope | default([]) }}", []any{}},
		{"range", "{{ range(2) }}", []any{0, 1}},
		{"text around makes text", "n={{ input.count }}", "n=3"},
		{"two expressions make text", "{{ input.count }}{{ input.count }}", "33"},
		{"plain string", "hello", "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := tpl.Eval(testVars())
			if err != nil {
				t.Fatalf("Eval(%q): %v", tt.src, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Eval(%q) = %#v, want %#v", tt.src, got, tt.want)
			}
		})
	}
}

func TestEvalReturnsACopyOfStructuredVariables(t *testing.T) {
	vars := testVars()
	got, err := NewSet().Eval("{{ input.map }}", vars)
	if err != nil {
		t.Fatal(err)
	}
	got.(map[string]any)["a"] = "changed"
	if vars["input"].(map[string]any)["map"].(map[string]any)["a"] != "x" {
		t.Error("changing Eval's result changed the variables")
	}
}

func TestUndefinedVariablesAreErrorsNamingThem(t *testing.T) {
	tests := []struct {
		name, src, variable string
	}{
		{"top-level name", "{{ nope }}", "nope"},
		{"missing map key", "echo {{ input.nme }}", "input.nme"},
		{"missing key by brackets", "{{ input['nme'] }}", "input['nme']"},
		{"index out of range", "{{ input.list[9] }}", "input.list[9]"},
		{"attribute of missing step", "{{ build.output.x }}", "build"},
		{"through a filter", "{{ input.nope | upper }}", "input.nope"},
		{"through trim", "{{ input.nope | trim }}", "input.nope"},
		{"in an if condition", "{% if input.nope %}x{% endif %}", "input.nope"},
		{"in a for loop", "{% for x in nope %}{{ x }}{% endfor %}", "nope"},
		{"on a later line", "a\nb {{ input.zzz }}\n", "input.zzz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for mode, run := range map[string]func() error{
				"Render": func() error { _, err := tpl.Render(testVars()); return err },
				"Eval":   func() error { _, err := tpl.Eval(testVars()); return err },
			} {
				err := run()
				if !errors.Is(err, ErrUndefined) {
					t.Fatalf("%s(%q) error = %v, want ErrUndefined", mode, tt.src, err)
				}
				if !strings.Contains(err.Error(), `"`+tt.variable+`"`) {
					t.Errorf("%s(%q) error %q does not name %q", mode, tt.src, err, tt.variable)
				}
			}
		})
	}
}

func TestUndefinedErrorQuotesTemplateAndVariable(t *testing.T) {
	_, err := NewSet().Render("echo {{ input.nme }}", testVars())
	want := `template "echo {{ input.nme }}": undefined variable "input.nme"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestUndefinedErrorInMultiLineTemplateGivesLine(t *testing.T) {
	_, err := NewSet().Render("set -e\necho ok\necho {{ input.nme }}\n", testVars())
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error = %v, want it to name line 3", err)
	}
}

func TestLongTemplateIsQuotedShortened(t *testing.T) {
	src := strings.Repeat("x", 500) + "{{ nope }}"
	_, err := NewSet().Render(src, nil)
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("error = %v, want a short message naming nope", err)
	}
}

func TestBadTemplatesFailWithErrorsNotPanics(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"unclosed expression", "{{ input.name", "template "},
		{"empty expression", "{{ }}", "template "},
		{"unknown filter", "{{ input.name | nosuch }}", "nosuch"},
		{"unknown tag", "{% frobnicate %}", "frobnicate"},
		{"unclosed if", "{% if input.on %}x", "template "},
		{"include cannot read files", "{% include '/etc/passwd' %}", "include"},
		{"import cannot read files", "{% import 'x' as y %}", "import"},
		{"extends cannot read files", "{% extends 'base' %}", "extends"},
		{"modulo by zero", "{{ 1 % 0 }}", "divide by zero"},
		{"negative repeat", "{{ 'a' * -1 }}", "negative"},
		{"mutating list method", "{{ input.list.append(4) }}", "append"},
		{"mutating dict method", "{{ input.map.update({'a': 1}) }}", "update"},
		{"range too large", "{{ range(1000000000) }}", "more than"},
		{"call of a non-function", "{{ input.name() }}", "template "},
		{"shell length in a template hints at the fix", "echo ${#arr[@]} {{ input.name }}", "{% raw %}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			if err == nil {
				_, err = tpl.Render(testVars())
			}
			if err == nil {
				t.Fatalf("%q: no error", tt.src)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "template ") {
				t.Errorf("%q: error %q, want it to start with template and contain %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestTemplatesDoNotChangeTheirVariables(t *testing.T) {
	for _, src := range []string{
		"{% set input.name = 'changed' %}{{ input.name }}",
		"{% set input['name'] = 'changed' %}{{ input.name }}",
		"{% set m = input %}{% set m.name = 'changed' %}{{ m.name }}",
		"{% set input = {'name': 'changed'} %}{{ input.name }}",
	} {
		vars := testVars()
		if got := render(t, src, vars); got != "changed" {
			t.Errorf("Render(%q) = %q, want changed", src, got)
		}
		if vars["input"].(map[string]any)["name"] != "world" {
			t.Errorf("Render(%q) changed the caller's input", src)
		}
	}
}

func TestTemplateRendersConcurrently(t *testing.T) {
	set := NewSet()
	src := "{% macro item(x) %}{{ x }}-{{ each.index }};{% endmacro %}" +
		"{% for x in input.list %}{{ item(x) }}{% endfor %}{% set ns = namespace(n=0) %}{% set ns.n = each.index %}{{ ns.n }}"
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vars := map[string]any{
				"input": map[string]any{"list": []any{"a", "b"}},
				"each":  map[string]any{"index": i},
			}
			got, err := set.Render(src, vars)
			want := strings.NewReplacer("I", itoa(i)).Replace("a-I;b-I;I")
			if err != nil || got != want {
				errs <- errors.New(got + " != " + want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if set.Len() != 1 {
		t.Errorf("set holds %d templates, want 1", set.Len())
	}
}

func itoa(i int) string {
	s, _ := valuetext.Text(i)
	return s
}

func TestIsTemplate(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"", false},
		{"plain text", false},
		{"a { b } c", false},
		{"json {\"a\": 1}", false},
		{"{{ x }}", true},
		{"{% if x %}{% endif %}", true},
		{"{# note #}", true},
		{"echo ${#arr[@]}", false},
		{"echo ${#arr[@]} {# n #}", true},
		{"echo ${HOME}", false},
	}
	for _, tt := range tests {
		if got := IsTemplate(tt.src); got != tt.want {
			t.Errorf("IsTemplate(%q) = %v, want %v", tt.src, got, tt.want)
		}
	}
}
