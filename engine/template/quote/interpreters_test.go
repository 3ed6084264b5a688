package quote

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostile returns values that would run code if a splicer let them out of
// their literal: the code they hold writes the canary file.
func hostile(canary string) []string {
	c := func(s string) string { return strings.ReplaceAll(s, "CANARY", canary) }
	return []string{
		`"; id`, `$(id)`, "`id`", `'`, `"`, `\`, `\\`, `\'`, `\"`, `${x}`, `{x}`, `{{x}}`, `}`, `{`, `*/`, `-->`, `<!--`, `</script>`,
		"\u2028", "\u2029", "a\nb", "a\r\nb", "\t\v\f\b\a", "\x00", "\x01\x1f\x7f", "‘quoted’ “quoted”", "é ü 日本 🎉 \ufeff",
		`'''`, `"""`, "```", `a[$(id)]`, `%s%d`, `\N{DASH}`, `\x41\u0041`,
		c(`'; open("CANARY", "w").write("x"); '`),
		c(`"; open("CANARY", "w").write("x"); "`),
		c(`'''); open("CANARY", "w").write("x"); ('''`),
		c(`"""); open("CANARY", "w").write("x"); ("""`),
		c(`{open("CANARY", "w").write("x")}`),
		c("\n__import__('os').system('touch CANARY')\n"),
		c(`'); require("fs").writeFileSync("CANARY", "x"); ('`),
		c(`"); require("fs").writeFileSync("CANARY", "x"); ("`),
		c("`); require('fs').writeFileSync('CANARY', 'x'); (`"),
		c("${require('fs').writeFileSync('CANARY', 'x')}"),
		c("\u2028require('fs').writeFileSync('CANARY', 'x')//"),
		c(`\'); require("fs").writeFileSync("CANARY", "x"); //`),
		c("*/ require('fs').writeFileSync('CANARY', 'x') /*"),
		c(`"); os.WriteFile("CANARY", nil, 0o600); ("`),
		c("` + func() string { os.WriteFile(\"CANARY\", nil, 0o600); return \"\" }() + `"),
		strings.Repeat(`A'"\`+"`${}{}\n", 100<<10/10),
	}
}

// langContext is a place a value can stand in a script: expr is an
// expression holding the placeholder P that yields "<" + value + ">".
type langContext struct {
	name string
	expr string
}

var pythonContexts = []langContext{
	{"single quotes", `'<P>'`},
	{"double quotes", `"<P>"`},
	{"triple single quotes", `'''<P>'''`},
	{"triple double quotes", `"""<P>"""`},
	{"u prefix", `u'<P>'`},
	{"raw", `r'<P>'`},
	{"raw double", `R"<P>"`},
	{"raw triple", `r'''<P>'''`},
	{"raw triple double", `rb"""<P>""".decode("utf-8", "surrogateescape")`},
	{"f-string", `f'{"<"}P{">"}'`},
	{"raw f-string", `rf'<P{">"}'`},
	{"bytes", `b'<P>'.decode("utf-8", "surrogateescape")`},
	{"raw bytes", `Br'<P>'.decode("utf-8", "surrogateescape")`},
	{"expression", `"<" + P + ">"`},
}

var jsContexts = []langContext{
	{"single quotes", `'<P>'`},
	{"double quotes", `"<P>"`},
	{"template literal", "`<P>`"},
	{"template literal between substitutions", "`${'<'}P${`${'>'}`}`"},
	{"expression", `"<" + P + ">"`},
}

// script builds a program that prints each value's expression as
// "length:bytes". Each value has its own sentinel.
type scriptLang struct {
	lang     Lang
	contexts []langContext
	program  func(exprs []string) string
	run      func(t *testing.T, dir, src string) []byte
}

func TestHostileValuesStayDataInPython(t *testing.T) {
	python := need(t, "python3")
	runHostile(t, scriptLang{lang: Python, contexts: pythonContexts,
		program: func(exprs []string) string {
			return "import sys\nfor v in [\n" + strings.Join(exprs, ",\n") + ",\n]:\n" +
				"    b = v.encode('utf-8', 'surrogateescape')\n    sys.stdout.buffer.write(b'%d:' % len(b) + b)\n"
		},
		run: func(t *testing.T, dir, src string) []byte { return runFile(t, dir, "main.py", src, python) },
	})
}

func TestHostileValuesStayDataInJavaScript(t *testing.T) {
	node := need(t, "node")
	runHostile(t, scriptLang{lang: JavaScript, contexts: jsContexts,
		program: jsProgram,
		run:     func(t *testing.T, dir, src string) []byte { return runFile(t, dir, "main.js", src, node) },
	})
}

func TestHostileValuesStayDataInTypeScript(t *testing.T) {
	node := need(t, "node")
	tsc, err := exec.LookPath("tsc")
	if err != nil {
		if os.Getenv("APPLIANCE_REQUIRE_NODE") == "1" {
			t.Fatal("tsc is not on PATH and APPLIANCE_REQUIRE_NODE=1")
		}
		t.Skip("tsc is not on PATH (npm install -g typescript); the typescript splicer is the javascript one, tested on node")
	}
	runHostile(t, scriptLang{lang: TypeScript, contexts: jsContexts,
		program: func(exprs []string) string {
			return "declare const process: any, Buffer: any;\n" + jsProgram(exprs)
		},
		run: func(t *testing.T, dir, src string) []byte {
			runFile(t, dir, "main.ts", src, tsc, "--target", "es2020", "--outDir", dir)
			return runFile(t, dir, "", "", node, filepath.Join(dir, "main.js"))
		},
	})
}

func jsProgram(exprs []string) string {
	return "for (const v of [\n" + strings.Join(exprs, ",\n") + ",\n]) {\n" +
		"  const b = Buffer.from(v, 'utf8');\n  process.stdout.write(b.length + ':');\n  process.stdout.write(b);\n}\n"
}

// runHostile splices every hostile value into every context of a
// language, runs the program and checks it printed each value back byte
// for byte and that no value ran as code.
func runHostile(t *testing.T, l scriptLang) {
	for _, c := range l.contexts {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			canary := filepath.Join(dir, "canary")
			values := hostile(canary)
			spliced := map[string]any{}
			var exprs []string
			for i, v := range values {
				s := fmt.Sprintf("SENTINEL_%d_X", i)
				spliced[s] = v
				exprs = append(exprs, strings.ReplaceAll(c.expr, "P", s))
			}
			src, err := Splice(l.lang, l.program(exprs), spliced)
			if err != nil {
				t.Fatalf("Splice: %v", err)
			}
			out := l.run(t, dir, src)
			if _, err := os.Stat(canary); err == nil {
				t.Fatalf("a value ran as code: %s exists", canary)
			}
			got := splitPrinted(t, out)
			if len(got) != len(values) {
				t.Fatalf("printed %d values, want %d", len(got), len(values))
			}
			for i, v := range values {
				if want := "<" + v + ">"; got[i] != want {
					t.Errorf("value %d: printed %.200q, want %.200q", i, got[i], want)
				}
			}
		})
	}
}

// splitPrinted parses "length:bytes" records.
func splitPrinted(t *testing.T, out []byte) []string {
	t.Helper()
	var got []string
	for len(out) > 0 {
		colon := bytes.IndexByte(out, ':')
		n, err := strconv.Atoi(string(out[:max(colon, 0)]))
		if colon < 0 || err != nil || colon+1+n > len(out) {
			t.Fatalf("output is not length:bytes records at %.100q", out)
		}
		got = append(got, string(out[colon+1:colon+1+n]))
		out = out[colon+1+n:]
	}
	return got
}

func need(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: the quoting tests run real interpreters", name)
	}
	return path
}

// runFile writes src to dir/name (when name is set) and runs the command
// on it with a deadline, returning its standard output.
func runFile(t *testing.T, dir, name, src string, command ...string) []byte {
	t.Helper()
	args := command[1:]
	if name != "" {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s\nscript (first 2000 bytes):\n%.2000s", command[0], name, err, stderr.Bytes(), src)
	}
	return out
}

// structured are values a placeholder that is exactly one expression
// yields, which must arrive as the same JSON in every language.
var structured = []any{
	0.0, 1.5, -2.0, 1e21, 1e-7, 123456789.0, 7, int64(-9), true, false, nil, "s'\"`${}\n",
	[]any{}, map[string]any{},
	[]any{1.0, "two", nil, []any{true, map[string]any{"deep": []any{-0.5}}}},
	map[string]any{"__proto__": map[string]any{"polluted": true}, "b": []any{nil}, "a'\"`${}": "v", "": 0.0},
}

func TestStructuredValuesRoundTripAsJSON(t *testing.T) {
	langs := []struct {
		lang    Lang
		bin     string
		file    string
		program func(exprs []string) string
	}{
		{Python, "python3", "main.py", func(exprs []string) string {
			return "import json\nfor v in [\n" + strings.Join(exprs, ",\n") + ",\n]:\n    print(json.dumps(v))\n"
		}},
		{JavaScript, "node", "main.js", func(exprs []string) string {
			return "for (const v of [\n" + strings.Join(exprs, ",\n") + ",\n]) console.log(JSON.stringify(v));\n"
		}},
	}
	for _, l := range langs {
		t.Run(string(l.lang), func(t *testing.T) {
			bin := need(t, l.bin)
			values, exprs := map[string]any{}, []string(nil)
			for i, v := range structured {
				s := fmt.Sprintf("SENTINEL_%d_X", i)
				values[s] = v
				exprs = append(exprs, s)
			}
			src, err := Splice(l.lang, l.program(exprs), values)
			if err != nil {
				t.Fatalf("Splice: %v", err)
			}
			dir := t.TempDir()
			checkJSONLines(t, runFile(t, dir, l.file, src, bin), structured)
		})
	}
}

// checkJSONLines compares each printed JSON line with the value it stands
// for, both read back through encoding/json.
func checkJSONLines(t *testing.T, out []byte, want []any) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		var got, exp any
		b, _ := json.Marshal(w)
		if err := json.Unmarshal(b, &exp); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil || !reflect.DeepEqual(got, exp) {
			t.Errorf("value %d: printed %s, want %s (%v)", i, lines[i], b, err)
		}
	}
}

// TestHostileValuesStayDataInGo compiles one program (go run is slow)
// that prints the hostile values from an interpreted string, a raw
// string and an expression, and the structured values as JSON.
func TestHostileValuesStayDataInGo(t *testing.T) {
	goBin := need(t, "go")
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	picked := hostile(canary)
	values := map[string]any{}
	var exprs, jsons []string
	for i, v := range picked {
		for j, c := range []string{`"<P>"`, "`<P>`", `"<" + P + ">"`} {
			s := fmt.Sprintf("SENTINEL_%d_%d", i, j)
			values[s] = v
			exprs = append(exprs, strings.ReplaceAll(c, "P", s))
		}
	}
	for i, v := range structured {
		s := fmt.Sprintf("STRUCTURED_%d", i)
		values[s] = v
		jsons = append(jsons, s)
	}
	program := "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n" +
		"\tfor _, v := range []string{\n\t\t" + strings.Join(exprs, ",\n\t\t") + ",\n\t} {\n\t\tfmt.Printf(\"%d:%s\", len(v), v)\n\t}\n" +
		"\tfor _, v := range []any{\n\t\t" + strings.Join(jsons, ",\n\t\t") + ",\n\t} {\n\t\tb, err := json.Marshal(v)\n\t\tif err != nil {\n\t\t\tpanic(err)\n\t\t}\n\t\tfmt.Fprintln(os.Stderr, string(b))\n\t}\n}\n"
	src, err := Splice(Go, program, values)
	if err != nil {
		t.Fatalf("Splice: %v", err)
	}
	path := filepath.Join(dir, "main.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, stderr.Bytes())
	}
	if _, err := os.Stat(canary); err == nil {
		t.Fatalf("a value ran as code: %s exists", canary)
	}
	got := splitPrinted(t, out)
	if len(got) != 3*len(picked) {
		t.Fatalf("printed %d values, want %d", len(got), 3*len(picked))
	}
	for i, v := range picked {
		for j := range 3 {
			if want := "<" + v + ">"; got[3*i+j] != want {
				t.Errorf("value %d, context %d: printed %.200q, want %.200q", i, j, got[3*i+j], want)
			}
		}
	}
	checkJSONLines(t, stderr.Bytes(), structured)
}
