package template

import (
	"reflect"
	"testing"
)

func TestFilters(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"upper", "{{ input.name | upper }}", "WORLD"},
		{"lower", "{{ 'MiXeD' | lower }}", "mixed"},
		{"default replaces undefined", "{{ input.nope | default('x') }}", "x"},
		{"default replaces undefined deep path", "{{ input.nope.deeper | default('x') }}", "x"},
		{"default replaces undefined step", "{{ build.output | default('none yet') }}", "none yet"},
		{"default keeps defined", "{{ input.name | default('x') }}", "world"},
		{"default keeps empty string", "[{{ input.empty | default('x') }}]", "[]"},
		{"default with boolean replaces empty", "{{ input.empty | default('x', true) }}", "x"},
		{"default short name d", "{{ input.nope | d('y') }}", "y"},
		{"default then upper", "{{ input.nope | default('x') | upper }}", "X"},
		{"join with separator", "{{ say_hello.output.items | join(',') }}", "a,b"},
		{"join without separator", "{{ say_hello.output.items | join }}", "ab"},
		{"join writes values as text", "{{ input.list | join(' ') }}", "1 two true"},
		{"join with keyword separator", "{{ input.list | join(d='-') }}", "1-two-true"},
		{"join by attribute", "{{ [{'n': 'a'}, {'n': 'b'}] | join(',', attribute='n') }}", "a,b"},
		{"length of list", "{{ input.list | length }}", "3"},
		{"length of string", "{{ input.name | length }}", "5"},
		{"length of map", "{{ input.map | length }}", "2"},
		{"count is length", "{{ input.list | count }}", "3"},
		{"tojson object sorted and compact", "{{ input.map | tojson }}", `{"a":"x","b":2}`},
		{"tojson does not escape HTML or quotes", "{{ input.html | tojson }}", `"<a href=\"x\">&'</a>"`},
		{"tojson string", "{{ input.name | tojson }}", `"world"`},
		{"tojson nil", "{{ input.none | tojson }}", "null"},
		{"tojson boolean", "{{ input.on | tojson }}", "true"},
		{"tojson list literal", "{{ [1, 'a', none] | tojson }}", `[1,"a",null]`},
		{"tojson dict literal", "{{ {'b': 1, 'a': [true]} | tojson }}", `{"a":[true],"b":1}`},
		{"tojson indent", "{{ input.map | tojson(indent=2) }}", "{\n  \"a\": \"x\",\n  \"b\": 2\n}"},
		{"json_encode is tojson", "{{ say_hello.output | json_encode }}", `{"greeting":"hi","items":["a","b"]}`},
		{"fromjson", "{{ ('{\"k\": [1]}' | fromjson).k[0] }}", "1"},
		{"trim spaces", "[{{ '  a b  ' | trim }}]", "[a b]"},
		{"trim chars", "{{ '--a--' | trim('-') }}", "a"},
		{"trim a number", "{{ input.count | trim }}", "3"},
		{"replace all", "{{ 'a-b-c' | replace('-', '_') }}", "a_b_c"},
		{"replace count", "{{ 'a-b-c' | replace('-', '_', 1) }}", "a_b-c"},
		{"chained filters", "{{ ' Hello ' | trim | lower | replace('l', 'L') }}", "heLLo"},
		{"builtin filter still present", "{{ input.list | first }}", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(t, tt.src, testVars()); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	tests := []struct {
		name, src string
	}{
		{"fromjson of invalid JSON", "{{ 'nope{' | fromjson }}"},
		{"tojson bad indent", "{{ input.map | tojson(indent='x') }}"},
		{"join of a number", "{{ input.count | join(',') }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if out, err := tpl.Render(testVars()); err == nil {
				t.Errorf("Render(%q) = %q, want an error", tt.src, out)
			}
		})
	}
}

func TestFromJSONYieldsStructuredValue(t *testing.T) {
	got, err := NewSet().Eval(`{{ input.raw | fromjson }}`, map[string]any{"input": map[string]any{"raw": `{"a":[1,2.5]}`}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{1.0, 2.5}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}
