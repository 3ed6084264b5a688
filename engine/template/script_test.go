package template

import (
	"context"
	"strings"
	"testing"

	quoting "github.com/appliance-sh/appliance/engine/template/quote"
)

func TestRenderScriptQuotesEveryValue(t *testing.T) {
	vars := map[string]any{"input": map[string]any{"name": `"; id; echo "`, "n": 3, "list": []any{"a", "b'"}, "ok": true}}
	cases := []struct{ src, want string }{
		{`echo "hello {{ input.name }}"`, `echo "hello "'"; id; echo "'""`},
		{`echo {{ input.n }} {{ input.ok }}`, `echo '3' 'true'`},
		{`for x in {% for i in input.list %}{{ i }} {% endfor %}; do :; done`, `for x in 'a' 'b'\''' ; do :; done`},
		{`echo '{{ input.name }}'`, `echo '"; id; echo "'`},
		// A macro's text is one value, quoted as a whole.
		{`{% macro greet(n) %}hi {{ n }}{% endmacro %}echo {{ greet(input.n) }}`, `echo 'hi 3'`},
		// A set block builds a variable, compared as the value.
		{`{% set x %}{{ input.n }}{% endset %}{% if x == "3" %}echo three{% endif %}`, `echo three`},
		// raw opts out.
		{`{{ "echo hi" | raw }}`, `echo hi`},
		{"cat <<EOF\n{{ input.name }} $HOME\nEOF\n", "cat <<EOF\n\"; id; echo \" $HOME\nEOF\n"},
	}
	for _, c := range cases {
		got, err := NewSet().RenderScript(context.Background(), c.src, vars, quoting.Shell)
		if err != nil || got != c.want {
			t.Errorf("%s:\ngot  %q (%v)\nwant %q", c.src, got, err, c.want)
		}
	}
}

// TestRenderScriptErrorsNameTheExpression: the render fails naming the
// expression and its line, never the value (it may be a secret).
func TestRenderScriptErrorsNameTheExpression(t *testing.T) {
	vars := map[string]any{"input": map[string]any{"nul": "top\x00secret", "eof": "top secret\nEOF\nid", "cmd": "topsecret", "flag": true}}
	cases := []struct{ src, want string }{
		{"echo ok\necho {{ input.nul }}", `{{ input.nul }} (line 2): its value holds a NUL byte`},
		{"cat <<EOF\n{{ input.eof }}\nEOF", `{{ input.eof }} (line 2): its value holds the line "EOF"`},
		{"{% if input.flag %}eval{% else %}echo{% endif %} {{ input.cmd }}", `{{ input.cmd }} (line 1): it is an argument of eval`},
		{"{% filter upper %}echo {{ input.cmd }}{% endfilter %}", `filter`},
		{"{{ input.cmd }} {% if input.flag %}'{% endif %}", `does not parse as a shell script`},
	}
	for _, c := range cases {
		_, err := NewSet().RenderScript(context.Background(), c.src, vars, quoting.Shell)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want it to say %s", c.src, err, c.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the value: %v", c.src, err)
		}
	}
	_, err := NewSet().RenderScript(context.Background(), cases[2].src, vars, quoting.Shell)
	if !strings.Contains(err.Error(), "found at render time") || !strings.Contains(err.Error(), `"$INPUT_CMD"`) {
		t.Errorf("a placement made by {%% if %%} should say it was found at render time and what to write: %v", err)
	}
}

func TestCheckScriptPointsAtThePlaceholder(t *testing.T) {
	cases := []struct {
		src       string
		line, col int
		want      string
	}{
		{"echo ok\n  {{ input.cmd }} --flag", 2, 3, `{{ input.cmd }}: it is a command name: the value would be run as a command; write "$INPUT_CMD" instead`},
		{"echo $(( {{ input.n }} + 1 ))", 1, 10, "arithmetic"},
		{"{# note #}\necho hi\neval \"{{ steps.x }}\"", 3, 7, `pass the value through env:`},
		{"echo 'oops {{ input.a }}", 1, 6, "does not parse"},
	}
	for _, c := range cases {
		ps := CheckScript(c.src, quoting.Shell)
		if len(ps) != 1 || ps[0].Line != c.line || ps[0].Col != c.col || !strings.Contains(ps[0].Msg, c.want) {
			t.Errorf("%q: got %+v, want one at %d:%d saying %s", c.src, ps, c.line, c.col, c.want)
		}
	}
	for _, ok := range []string{
		`echo "{{ input.a }}"`, "{% if x %}\nif true; then\n{% endif %}\necho {{ input.a }}", `{{ input.cmd | raw }} --flag`,
	} {
		if ps := CheckScript(ok, quoting.Shell); len(ps) > 0 {
			t.Errorf("%q: %+v", ok, ps)
		}
	}
}
