package quote

import (
	"errors"
	"strings"
	"testing"
)

// contextCase splices V (the value of sentinel "V") and W (a list) into
// src: want is the script after splicing, or problem a text the Problem's
// message holds (and then Check reports it too, at the sentinel's offset).
type contextCase struct {
	name    string
	src     string
	want    string
	problem string
	// renderOnly: the problem depends on the value, so Check cannot see it
	renderOnly bool
}

// spliceValues are the values of the context tests: V is a string that
// exercises every quote and brace, W a structured value.
var spliceValues = map[string]any{
	"V": "it's \"a\" {b} \\ $c `d`\n",
	"W": []any{1.0, "x", nil, true, map[string]any{"k": -2.5}},
	"R": "é",
}

func runContextCases(t *testing.T, lang Lang, cases []contextCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Splice(lang, c.src, spliceValues)
			problems := Check(lang, c.src, []string{"V", "W", "R"})
			if c.problem == "" {
				if err != nil {
					t.Fatalf("Splice(%q): %v", c.src, err)
				}
				if got != c.want {
					t.Fatalf("Splice(%q)\n got: %s\nwant: %s", c.src, got, c.want)
				}
				if len(problems) > 0 {
					t.Fatalf("Check(%q) = %v, want none", c.src, problems)
				}
				return
			}
			var p Problem
			if !errors.As(err, &p) || !strings.Contains(p.Message, c.problem) {
				t.Fatalf("Splice(%q) = %q, %v; want a Problem saying %q", c.src, got, err, c.problem)
			}
			if p.Offset < 0 || p.Offset >= len(c.src) || !strings.HasPrefix(c.src[p.Offset:], p.Sentinel) {
				t.Fatalf("Problem %+v does not point at its sentinel in %q", p, c.src)
			}
			if c.renderOnly {
				if len(problems) > 0 {
					t.Fatalf("Check(%q) = %v, want none (the value makes the problem)", c.src, problems)
				}
				return
			}
			if len(problems) == 0 || problems[0] != p {
				t.Fatalf("Check(%q) = %v, want %v", c.src, problems, p)
			}
		})
	}
}

func TestPythonContexts(t *testing.T) {
	const v = `it\'s \"a\" {b} \\ $c ` + "`d`" + `\n`
	runContextCases(t, Python, []contextCase{
		{name: "single quotes", src: `x = 'A V B'`, want: `x = 'A ` + v + ` B'`},
		{name: "double quotes", src: `x = "V"`, want: `x = "` + v + `"`},
		{name: "triple quotes", src: "x = '''\nV'''", want: "x = '''\n" + v + "'''"},
		{name: "u prefix", src: `x = U"V"`, want: `x = U"` + v + `"`},
		{name: "f-string doubles braces", src: `x = f'{a!r:>{w}} V {{}}'`, want: `x = f'{a!r:>{w}} it\'s \"a\" {{b}} \\ $c ` + "`d`" + `\n {{}}'`},
		{name: "nested f-string (PEP 701)", src: `x = f"{f"{y}"} V"`, want: `x = f"{f"{y}"} it\'s \"a\" {{b}} \\ $c ` + "`d`" + `\n"`},
		{name: "raw string closes and reopens", src: `x = r'\d V\w'`, want: `x = r'\d ' '` + v + `' r'\w'`},
		{name: "raw f-string closes and reopens", src: `x = rF"{a}V"`, want: `x = rF"{a}" '` + v + `' rF""`},
		{name: "raw triple", src: `x = r"""a"V"""`, problem: "right after a quote"},
		{name: "bytes escape every non-ASCII byte", src: `x = b'R'`, want: `x = b'\xc3\xa9'`},
		{name: "raw bytes", src: `x = br'R'`, want: `x = br'' b'\xc3\xa9' br''`},
		{name: "expression", src: `x = V`, want: `x = '` + v + `'`},
		{name: "structured expression", src: `print(W)`, want: `print([1, 'x', None, True, {'k': (-2.5)}])`},
		{name: "line continuation", src: "x = \\\n  V", want: "x = \\\n  '" + v + "'"},
		{name: "string after a continued line", src: "x = 1 + \\\n 2; y = 'V'", want: "x = 1 + \\\n 2; y = '" + v + "'"},
		{name: "hash inside a string is no comment", src: `x = "#"; y = V`, want: `x = "#"; y = '` + v + `'`},
		{name: "comment", src: "x = 1 # V", problem: "in a comment"},
		{name: "f-string field", src: `x = f"{V}"`, problem: "f-string's {} expression"},
		{name: "f-string field after a backslash", src: `x = f'\{V}'`, problem: "f-string's {} expression"},
		{name: "raw f-string field after a backslash", src: `x = rf'\{V}'`, problem: "f-string's {} expression"},
		{name: "f-string format spec", src: `x = f"{a:{V}}"`, problem: "f-string's {} expression"},
		{name: "part of a name", src: `x = fooV`, problem: "inside a name"},
		{name: "part of a number", src: `x = 0xV`, problem: "inside a number"},
		{name: "attribute", src: `x = os.V`, problem: "attribute name"},
		{name: "def", src: "def V():\n  pass", problem: `after "def"`},
		{name: "import", src: `from os import path, V`, problem: "in an import"},
		{name: "decorator", src: "@V\ndef f(): pass", problem: "in a decorator"},
		{name: "escape sequence", src: `x = "\V"`, problem: "escape sequence"},
		{name: "hex escape", src: `x = "\x4V"`, problem: "escape sequence"},
		{name: "raw string after a backslash", src: `x = r"\V"`, problem: "escape sequence"},
		{name: "after an unterminated string", src: "x = 'a\ny = V", problem: "does not lex as python"},
	})
}

func TestJavaScriptContexts(t *testing.T) {
	const v = `it\'s \"a\" {b} \\ \$c \` + "`d\\`" + `\n`
	for _, lang := range []Lang{JavaScript, TypeScript} {
		t.Run(string(lang), func(t *testing.T) {
			runContextCases(t, lang, []contextCase{
				{name: "single quotes", src: `x = 'A V B'`, want: `x = 'A ` + v + ` B'`},
				{name: "double quotes", src: `x = "V"`, want: `x = "` + v + `"`},
				{name: "template literal", src: "x = `${a}V${b}`", want: "x = `${a}" + v + "${b}`"},
				{name: "nested template literal", src: "x = `${`${a}`}V`", want: "x = `${`${a}`}" + v + "`"},
				{name: "brace in a substitution", src: "x = `${ {a: 1}.a }V`", want: "x = `${ {a: 1}.a }" + v + "`"},
				{name: "expression", src: `x = V`, want: `x = "` + v + `"`},
				{name: "structured expression", src: `f(W)`, want: `f([1, "x", null, true, ({"k": (-2.5)})])`},
				{name: "division is not a regex", src: `x = a / V / 2`, want: `x = a / "` + v + `" / 2`},
				{name: "regex holding a quote", src: `if (x) /'/.test(V)`, want: `if (x) /'/.test("` + v + `")`},
				{name: "division after an object literal", src: `x = {} / 1; y = "'/; z = V; w = '"`, want: `x = {} / 1; y = "'/; z = ` + v + `; w = '"`},
				{name: "regex after a block", src: "if (a) {}\n/'/.test(V)", want: "if (a) {}\n/'/.test(\"" + v + "\")"},
				{name: "text of a structured value", src: `x = 'W'`, want: `x = '[1,\"x\",null,true,{\"k\":-2.5}]'`},
				{name: "regex after return", src: "return /[/']/.test(V)", want: "return /[/']/.test(\"" + v + "\")"},
				{name: "html close comment mid-line is code", src: "x = a-->0; y = V", want: "x = a-->0; y = \"" + v + "\""},
				{name: "line comment", src: "x = 1 // V", problem: "in a comment"},
				{name: "block comment", src: "/* V */", problem: "in a comment"},
				{name: "html open comment", src: "x = 1 <!-- V", problem: "in a comment"},
				{name: "html close comment", src: "x = 1\n  --> V", problem: "in a comment"},
				{name: "hashbang", src: "#!/usr/bin/env node V\n", problem: "in a comment"},
				{name: "template substitution", src: "x = `${V}`", problem: "template literal's ${}"},
				{name: "tagged template", src: "x = sql`select V`", problem: "tagged template"},
				{name: "regex", src: `x = /aV/`, problem: "regular expression"},
				{name: "part of a name", src: `x = fooV`, problem: "inside a name"},
				{name: "property", src: `x = a?.V`, problem: "property name"},
				{name: "declaration", src: `let V = 1`, problem: `after "let"`},
				{name: "import path", src: `import x from "./V.js"`, problem: "module path"},
				{name: "require path", src: `require('V')`, problem: "module path"},
				{name: "escape sequence", src: `x = "\uV"`, problem: "escape sequence"},
				{name: "after an unterminated comment", src: "/* x\ny = V", problem: "does not lex as javascript"},
			})
		})
	}
}

func TestGoContexts(t *testing.T) {
	const v = `it's \"a\" {b} \\ $c ` + "`d`" + `\n`
	const pkg = "package main\n"
	runContextCases(t, Go, []contextCase{
		{name: "interpreted string", src: pkg + `var x = "A V B"`, want: pkg + `var x = "A ` + v + ` B"`},
		{name: "raw string becomes one interpreted string", src: pkg + "var x = `\\d\r\nV`[0]", want: pkg + `var x = "\\d\n` + v + `"[0]`},
		{name: "struct tag", src: pkg + "type T struct{ F int `json:\"V\"` }", want: pkg + `type T struct{ F int "json:\"it's \"a\" {b} \\ $c ` + "`d`" + `\n\"" }`},
		{name: "rune", src: pkg + "var r = 'R'", want: pkg + "var r = 'é'"},
		{name: "expression", src: pkg + "var x = V", want: pkg + `var x = "` + v + `"`},
		{name: "structured expression", src: pkg + "var x = W", want: pkg + `var x = []any{float64(1), "x", any(nil), true, map[string]any{"k": float64(-2.5)}}`},
		{name: "rune of a long value", src: pkg + "var r = 'V'", problem: "rune literal holds exactly one character", renderOnly: true},
		{name: "rune with other text", src: pkg + `var r = 'aV'`, problem: "does not lex as go"},
		{name: "comment", src: pkg + "// V", problem: "in a comment"},
		{name: "directive", src: pkg + "//go:generate V", problem: "in a comment"},
		{name: "import path", src: pkg + "import (\n\t\"fmt\"\n\tx \"V\"\n)", problem: "import path"},
		{name: "selector", src: pkg + "var x = os.V", problem: "selector"},
		{name: "func name", src: pkg + "func V() {}", problem: `after "func"`},
		{name: "part of a name", src: pkg + "var x = fooV", problem: "inside a name"},
		{name: "escape sequence", src: pkg + `var x = "\xV"`, problem: "escape sequence"},
		{name: "after a lexical error", src: pkg + "var x = \"a\nvar y = V", problem: "does not lex as go"},
	})
}

func TestSpliceRefusesNonIdentifierSentinels(t *testing.T) {
	for _, lang := range []Lang{Python, JavaScript, TypeScript, Go} {
		if _, err := Splice(lang, "x = 'a b'", map[string]any{"a b": "x"}); err == nil || !strings.Contains(err.Error(), "sentinel") {
			t.Errorf("%s: Splice with sentinel %q = %v, want an error naming the sentinel", lang, "a b", err)
		}
	}
}
