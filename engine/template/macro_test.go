package template

import (
	"strings"
	"testing"
)

// A macro calling itself without end used to overflow the Go stack, a fatal
// error that killed the whole process; now it is the template's error.
func TestRunawayMacroRecursionIsAnError(t *testing.T) {
	for _, src := range []string{
		"{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}",
		"{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}x{{ a() }}",
		"{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{% for i in [1, 2] %}{{ m(i) }}{% endfor %}",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		for _, eval := range []func() (any, error){
			func() (any, error) { return tpl.Render(nil) },
			func() (any, error) { return tpl.Eval(nil) },
		} {
			_, err := eval()
			if err == nil || !strings.Contains(err.Error(), "calls nest deeper than 100") {
				t.Fatalf("%q: error %v, want the nesting limit", src, err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("%q: error of %d bytes, want it short: %.300s", src, len(err.Error()), err)
			}
		}
	}
}

func TestBoundedMacroRecursionRenders(t *testing.T) {
	tpl, err := Parse("{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{{ n % 10 }}{% endmacro %}{{ m(99) }}|{{ m(2) }}")
	if err != nil {
		t.Fatal(err)
	}
	out, err := tpl.Render(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Repeat("0123456789", 10) + "|012"; out != want {
		t.Fatalf("got %q, want %q", out, want)
	}
}
