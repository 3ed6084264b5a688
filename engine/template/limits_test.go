package template

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// slack bounds how late a limit may trip: the bombs would run for hours
// or fill memory, so tripping at all is the point, and promptness is
// checked where timing means something, not under the race detector on
// a shared CI machine (10 times slower, the cores oversubscribed).
func slack(d time.Duration) time.Duration {
	if raceDetector {
		return 10 * d
	}
	return d
}

// limited returns a context bound as the engine binds a render.
func limited(t *testing.T, lim Limits) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(WithLimits(context.Background(), lim), lim.Time)
	t.Cleanup(cancel)
	return ctx
}

func TestRenderBombsStopAtTheOutputLimit(t *testing.T) {
	lim := Limits{Time: time.Minute, Output: 1 << 20}
	tests := []struct{ name, src string }{
		{"string product", "{{ 'a' * 100000000 }}"},
		{"string product in text", "x {{ 'ab' * 100000000 }} y"},
		{"product of products", "{{ ('a' * 1000000) * 1000 }}"},
		{"doubling concatenation", "{% set ns = namespace(s='aaaaaaaa') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}"},
		{"doubling list", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}"},
		{"loop writing literal text", "{% for i in range(100000) %}0123456789abcdefghijklmnopqrstuvwxyz{% endfor %}"},
		{"loop inside a macro", "{% macro m() %}{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endmacro %}{{ m() | length }}"},
		{"loop inside a set block", "{% set s %}{% for i in range(100000) %}0123456789abcdefghijklmnopqrstuvwxyz{% endfor %}{% endset %}{{ s | length }}"},
		{"replace that multiplies", "{{ ('a' * 100000) | replace('a', 'b' * 100000) | length }}"},
		{"padding", "{{ 'a' | center(1000000000) | length }}"},
		{"join of many large items", "{% set big = 'a' * 1000000 %}{{ [big, big, big] | join('') | length }}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := Parse(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tpl.EvalContext(limited(t, lim), testVars())
			var le *LimitError
			if !errors.As(err, &le) || le.Key != "template_output" {
				t.Fatalf("err = %v, want the template_output limit", err)
			}
			if !strings.Contains(err.Error(), "template exceeded limits.template_output (1MB)") {
				t.Errorf("err = %v, want it to name limits.template_output (1MB)", err)
			}
			if d := time.Since(start); d > slack(5*time.Second) {
				t.Errorf("took %v to trip", d)
			}
		})
	}
}

func TestRenderBombsStopAtTheTimeLimit(t *testing.T) {
	lim := Limits{Time: 200 * time.Millisecond, Output: 1 << 20}
	tests := []struct{ name, src string }{
		{"three nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}"},
		{"loops in a macro", "{% macro m() %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endmacro %}{{ m() }}"},
		{"loops in a condition", "{% for i in range(100000) %}{% for j in range(100000) %}{% if i * j > -1 %}{% endif %}{% endfor %}{% endfor %}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := NewSet().RenderContext(limited(t, lim), tt.src, nil)
			elapsed := time.Since(start)
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "template exceeded limits.template_time (200ms)") {
				t.Fatalf("err = %v, want the template_time limit", err)
			}
			if elapsed > lim.Time+slack(2*time.Second) {
				t.Errorf("stopped after %v, limit %v", elapsed, lim.Time)
			}
		})
	}
}

func TestRendersWithinLimitsAreUnchanged(t *testing.T) {
	lim := Limits{Time: time.Minute, Output: 1 << 20}
	tpl, err := Parse(benchScript)
	if err != nil {
		t.Fatal(err)
	}
	want, err := tpl.Render(testVars())
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.RenderContext(limited(t, lim), testVars())
	if err != nil || got != want {
		t.Fatalf("limited render = %q, %v; want %q", got, err, want)
	}
	v, err := NewSet().EvalContext(limited(t, lim), "{{ 'ab' * 3 ~ 'c' }}", nil)
	if err != nil || v != "abababc" {
		t.Fatalf("product = %v, %v", v, err)
	}
	// Exactly at the limit is within it.
	out, err := NewSet().RenderContext(limited(t, Limits{Time: time.Minute, Output: 10}), "{{ 'a' * 10 }}", nil)
	if err != nil || out != "aaaaaaaaaa" {
		t.Fatalf("render at the limit = %q, %v", out, err)
	}
}
