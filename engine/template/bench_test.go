package template

import "testing"

// benchScript is a typical script step: a few variables, a loop, a filter.
const benchScript = `#!/bin/bash
set -euo pipefail
echo "deploying {{ input.name | upper }} ({{ input.count }} replicas)"
{% for item in say_hello.output.items %}
echo "item {{ loop.index }}: {{ item }}"
{% endfor %}
curl -H "Authorization: Bearer {{ secret.TOKEN }}" -d '{{ input.map | tojson }}' https://example.invalid
`

func BenchmarkRenderScript(b *testing.B) {
	tpl, err := Parse(benchScript)
	if err != nil {
		b.Fatal(err)
	}
	vars := testVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvalRawValue(b *testing.B) {
	s := NewSet()
	vars := testVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Eval("{{ say_hello.output }}", vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseScript(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchScript); err != nil {
			b.Fatal(err)
		}
	}
}
