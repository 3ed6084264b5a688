package template

import "testing"

// fuzzVars is a fixed variable map with every kind of value a template meets.
func fuzzVars() map[string]any {
	return map[string]any{
		"input": map[string]any{
			"name": "world", "count": 3, "ratio": 2.5, "on": true, "none": nil,
			"list": []any{1, "two", false, map[string]any{"k": "v"}},
			"map":  map[string]any{"a": 1, "b": []any{"x"}},
		},
		"build":   map[string]any{"output": map[string]any{"ok": true, "items": []any{"a", "b"}}},
		"each":    map[string]any{"item": "x", "index": 0},
		"secret":  map[string]any{"TOKEN": "s3cr3t"},
		"secrets": map[string]any{"TOKEN": "s3cr3t"},
	}
}

// FuzzParse checks that no template source, however broken, makes parsing
// or rendering panic: every failure must come back as an error.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "plain", "{{ input.name }}", "echo {{ input.nme }}\n",
		"{{ input.nope | default('x') | upper }}",
		"{% if input.on %}{{ input.list | join(',') }}{% else %}no{% endif %}",
		"{% for x in input.list %}{{ loop.index }}={{ x | tojson }}{% endfor %}",
		"{{ build.output }}", "{{ input.map | json_encode(indent=2) }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = 2 %}{{ ns.a }}",
		"{{ 1 % 0 }}", "{{ 'a' * -1 }}", "{{ range(3) }}", "{# c #}{{ x if y else z }}",
		"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1) }}", "{% raw %}{{ x }}{% endraw %}",
		"{{ input.list[1:] }}", "{{ {'a': [1, 2.5, none]} }}", "{{ each.item ~ each.index }}",
	} {
		f.Add(seed)
	}
	vars := fuzzVars()
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(vars)
		_, _ = tpl.Eval(vars)
	})
}
