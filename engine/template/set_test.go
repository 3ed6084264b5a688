package template

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSetParsesEachSourceOnce(t *testing.T) {
	s := NewSet()
	a, err := s.Parse("{{ input.name }}")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Parse("{{ input.name }}")
	if a != b {
		t.Error("second Parse of the same source returned a new template")
	}
	if s.Len() != 1 {
		t.Errorf("Len = %d, want 1", s.Len())
	}
}

func TestSetRemembersParseErrors(t *testing.T) {
	s := NewSet()
	_, err1 := s.Parse("{{ broken")
	_, err2 := s.Parse("{{ broken")
	if err1 == nil || err1 != err2 {
		t.Errorf("errors = %v, %v; want the same cached error", err1, err2)
	}
}

func TestNilSetParsesWithoutCaching(t *testing.T) {
	var s *Set
	got, err := s.Render("hi {{ input.name }}", testVars())
	if err != nil || got != "hi world" {
		t.Errorf("Render = %q, %v", got, err)
	}
	if s.Len() != 0 {
		t.Error("nil set reports templates")
	}
}

func TestSetLeavesPlainStringsAlone(t *testing.T) {
	s := NewSet()
	for _, src := range []string{"", "plain", "a } b", "100%"} {
		v, err := s.Eval(src, nil)
		if err != nil || v != src {
			t.Errorf("Eval(%q) = %#v, %v", src, v, err)
		}
		out, err := s.Render(src, nil)
		if err != nil || out != src {
			t.Errorf("Render(%q) = %q, %v", src, out, err)
		}
	}
	if s.Len() != 0 {
		t.Errorf("plain strings were parsed: Len = %d", s.Len())
	}
}

func TestEvalValueEvaluatesEveryString(t *testing.T) {
	in := map[string]any{
		"name":    "{{ input.name }}",
		"count":   "{{ input.count }}",
		"text":    "n={{ input.count }}",
		"literal": 7,
		"flag":    true,
		"nothing": nil,
		"nested": map[string]any{
			"items": []any{"{{ each.item }}", "plain", map[string]any{"obj": "{{ input.map }}"}},
		},
		"env": map[string]string{"TOKEN": "{{ secret.TOKEN }}"},
	}
	want := map[string]any{
		"name":    "world",
		"count":   3,
		"text":    "n=3",
		"literal": 7,
		"flag":    true,
		"nothing": nil,
		"nested": map[string]any{
			"items": []any{"pear", "plain", map[string]any{"obj": map[string]any{"a": "x", "b": 2}}},
		},
		"env": map[string]any{"TOKEN": "s3cr3t"},
	}
	got, err := NewSet().EvalValue(in, testVars())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EvalValue =\n%#v\nwant\n%#v", got, want)
	}
	if in["name"] != "{{ input.name }}" || in["nested"].(map[string]any)["items"].([]any)[0] != "{{ each.item }}" {
		t.Error("EvalValue changed its input")
	}
}

func TestEvalValueErrorNamesThePath(t *testing.T) {
	in := map[string]any{
		"ok":   "{{ input.name }}",
		"args": []any{"fine", map[string]any{"name": "{{ input.nme }}"}},
	}
	_, err := NewSet().EvalValue(in, testVars())
	if !errors.Is(err, ErrUndefined) || !strings.HasPrefix(err.Error(), `args[1].name: template "{{ input.nme }}"`) {
		t.Errorf("error = %v", err)
	}
}

func TestEvalValueOfAScalarString(t *testing.T) {
	got, err := NewSet().EvalValue("{{ input.list }}", testVars())
	if err != nil || !reflect.DeepEqual(got, []any{1, "two", true}) {
		t.Errorf("EvalValue = %#v, %v", got, err)
	}
}
