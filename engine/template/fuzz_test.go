package template

import (
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

// Render bombs are out of the fuzzer's reach on purpose: `{{ 'a' * 10**10 }}`
// or nested `range(9999)` loops allocate or spin without bound, which is a
// resource limit's job (render time and output size), not a parse or panic
// bug, and would only make the fuzzer run out of memory. So sources longer
// than maxFuzzSource, using `**`, or whose numeric literals multiply past
// maxFuzzWork are skipped; everything else must render to a value or an error.
const (
	maxFuzzSource = 1024
	maxFuzzWork   = 1e5
	fuzzHang      = 10 * time.Second
)

var numericLiteral = regexp.MustCompile(`[0-9][0-9A-Za-z_.]*`)

func renderBomb(src string) bool {
	if len(src) > maxFuzzSource || strings.Contains(src, "**") {
		return true
	}
	work := 1.0
	for _, lit := range numericLiteral.FindAllString(src, -1) {
		v, err := strconv.ParseFloat(strings.ReplaceAll(lit, "_", ""), 64)
		if err != nil {
			n, err := strconv.ParseInt(lit, 0, 64)
			if err != nil {
				return true // not a number we can size: assume the worst
			}
			v = float64(n)
		}
		if v < 0 {
			v = -v
		}
		if v > 1 {
			work *= v
		}
		if work > maxFuzzWork {
			return true
		}
	}
	return false
}

// FuzzParse checks that no template source, however broken, makes parsing
// or rendering panic: every failure must come back as an error. Sources
// that parse are rendered (text and native value) against fuzzVars.
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
		"{{ input.map.b[0] | fromjson }}", "{{ '{\"a\": [1]}' | fromjson }}",
		"{% set input.name = 'x' %}{{ input.name }}", "{{ input.ratio // 0 }}",
		"{{ input.list | sort | first }}", "{{ secret.TOKEN | replace('s', '') }}",
	} {
		f.Add(seed)
	}
	vars := fuzzVars()
	f.Fuzz(func(t *testing.T, src string) {
		if renderBomb(src) {
			t.Skip("a render bomb: bounded by render limits, not by the parser")
		}
		// The fuzzer has no per-input timeout: a hang must crash the worker
		// so the input is kept as a failure.
		defer time.AfterFunc(fuzzHang, func() { panic(fmt.Sprintf("template %q: no result after %s", src, fuzzHang)) }).Stop()
		tpl, err := Parse(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(vars)
		_, _ = tpl.Eval(vars)
		// Rendering works on a copy of assigned variables: the shared map
		// must come out unchanged for the next render.
		if !reflect.DeepEqual(vars, fuzzVars()) {
			t.Fatalf("rendering %q changed its variables", src)
		}
	})
}
