package template

import (
	"math"
	"reflect"
	"testing"
)

func TestTruthy(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, false},
		{"empty string", "", false},
		{"blank string", "  \n", false},
		{"false", "false", false},
		{"False as Jinja prints it", "False", false},
		{"FALSE padded", " FALSE ", false},
		{"zero string", "0", false},
		{"null", "null", false},
		{"NULL", "NULL", false},
		{"none", "none", false},
		{"None", "None", false},
		{"bool false", false, false},
		{"int zero", 0, false},
		{"int64 zero", int64(0), false},
		{"float zero", 0.0, false},
		{"uint zero", uint(0), false},
		{"empty map", map[string]any{}, false},
		{"empty list", []any{}, false},
		{"nil map", map[string]any(nil), false},
		{"true", "true", true},
		{"yes", "yes", true},
		{"no is a word, not falsy", "no", true},
		{"00 is not 0", "00", true},
		{"0.0 string is not 0", "0.0", true},
		{"text", "deploy", true},
		{"bool true", true, true},
		{"int", 1, true},
		{"negative", -1, true},
		{"float", 0.5, true},
		{"NaN is not zero", math.NaN(), true},
		{"map", map[string]any{"a": 1}, true},
		{"list", []any{0}, true},
		{"string list", []string{"a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Truthy(tt.v); got != tt.want {
				t.Errorf("Truthy(%#v) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

func TestWhenConditionsThroughEval(t *testing.T) {
	tests := []struct {
		src  string
		want bool
	}{
		{"{{ input.on }}", true},
		{"{{ input.off }}", false},
		{"{{ input.count > 5 }}", false},
		{"{{ input.list | length > 0 }}", true},
		{"{{ input.none }}", false},
		{"{{ input.empty }}", false},
		{"{{ 'prod' == 'prod' }}", true},
		{"{% if input.on %}false{% endif %}", false},
		{"{{ hook.is_success }}", false},
		{"{{ input.nope | default(false) }}", false},
	}
	for _, tt := range tests {
		v, err := NewSet().Eval(tt.src, testVars())
		if err != nil {
			t.Fatalf("Eval(%q): %v", tt.src, err)
		}
		if got := Truthy(v); got != tt.want {
			t.Errorf("Truthy(Eval(%q) = %#v) = %v, want %v", tt.src, v, got, tt.want)
		}
	}
}

func TestNaNInsideStructureRendersAsNull(t *testing.T) {
	out := render(t, "{{ v }}", map[string]any{"v": []any{math.NaN(), 1}})
	if out != "[null,1]" {
		t.Errorf("got %q, want [null,1]", out)
	}
}

func TestEvalNormalisesGoTypes(t *testing.T) {
	type named string
	vars := map[string]any{
		"i64":    int64(7),
		"u8":     uint8(8),
		"f32":    float32(1.5),
		"strs":   []string{"a", "b"},
		"smap":   map[string]string{"k": "v"},
		"anymap": map[any]any{"k": 1, 2: "two"},
		"named":  named("n"),
		"ptr":    &[]any{1},
		"nilmap": map[string]any(nil),
	}
	tests := []struct {
		src  string
		want any
	}{
		{"{{ i64 }}", 7},
		{"{{ u8 }}", 8},
		{"{{ f32 }}", 1.5},
		{"{{ strs }}", []any{"a", "b"}},
		{"{{ smap }}", map[string]any{"k": "v"}},
		{"{{ anymap }}", map[string]any{"k": 1, "2": "two"}},
		{"{{ named }}", "n"},
		{"{{ ptr }}", []any{1}},
		{"{{ nilmap }}", map[string]any{}},
	}
	for _, tt := range tests {
		got, err := NewSet().Eval(tt.src, vars)
		if err != nil {
			t.Fatalf("Eval(%q): %v", tt.src, err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Eval(%q) = %#v, want %#v", tt.src, got, tt.want)
		}
	}
}
