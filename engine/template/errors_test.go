package template

import (
	"errors"
	"strings"
	"testing"
)

// A failed render's error names the template (its expressions) and never
// holds a value it was rendered with: gonja writes the values it fails on
// into its messages, and errors travel to step records and load errors.
func TestRenderErrorsNeverCarryTheValues(t *testing.T) {
	const secret, nested, item = "sk-live-SECRETVALUE", "sk-live-NESTED", "sk-live-LISTED"
	vars := map[string]any{
		"secret": map[string]any{"T": secret, "N": map[string]any{"a": nested}},
		"input":  map[string]any{"l": []any{item}},
	}
	for _, src := range []string{
		`{{ secret.T() }}`,                         // gonja prints the map the method was called on
		`{{ secret.T | tojson(indent=secret.T) }}`, // a refused argument
		`{{ secret.N.a.b }}`,
		`{{ input.l[0] | fromjson }}`,
		`{{ input.l.pop() }}`,
		`{{ secret.T[5:"a"] }}`,
		`{% for x in secret.N.a %}{{ x.y }}{% endfor %}`,
		`{{ secret.T | replace(secret.T) }}`,
		"line one\n{{ (secret.T ~ secret.N.a)() }}",
	} {
		tpl, err := Parse(src)
		if err != nil {
			t.Fatalf("parse %q: %v", src, err)
		}
		for mode, render := range map[string]func() error{
			"Render": func() error { _, err := tpl.Render(vars); return err },
			"Eval":   func() error { _, err := tpl.Eval(vars); return err },
		} {
			err := render()
			if err == nil {
				t.Errorf("%s(%q): no error", mode, src)
				continue
			}
			for _, v := range []string{secret, nested, item} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("%s(%q) error carries the value %q: %v", mode, src, v, err)
				}
			}
			if !strings.Contains(err.Error(), "template ") {
				t.Errorf("%s(%q) error does not name the template: %v", mode, src, err)
			}
		}
	}
	// Scrubbing keeps what callers test errors for.
	tpl, _ := Parse(`{{ secret.nope }}`)
	if _, err := tpl.Render(vars); !errors.Is(err, ErrUndefined) || !strings.Contains(err.Error(), `"secret.nope"`) {
		t.Errorf("undefined variable error %v", err)
	}
}
