package quote

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// testKey stands for a placeholder the way the renderer writes one.
const testKey = "aq0123456789abcdefq1q"

// shellContext is a script with one placeholder (S) and what it prints
// for a value.
type shellContext struct {
	name     string
	src      string
	want     func(v string) string
	bashOnly bool // dash has no such syntax
	hdoc     bool // a value holding the line EOF must fail
	expands  bool // the printed word holds an expansion of the script's own
}

func same(v string) string { return v }

var shellContexts = []shellContext{
	{name: "bare word", src: "printf '%s' S", want: same},
	{name: "word with text", src: "printf '%s' pre-S-post", want: func(v string) string { return "pre-" + v + "-post" }},
	{name: "double quotes", src: `printf '%s' "S"`, want: same},
	{name: "double quotes with text", src: `printf '%s' "hello S!"`, want: func(v string) string { return "hello " + v + "!" }},
	{name: "single quotes", src: `printf '%s' 'S'`, want: same},
	{name: "single quotes with text", src: `printf '%s' 'a "S" b'`, want: func(v string) string { return `a "` + v + `" b` }},
	{name: "two in one word", src: `printf '%s' S"S"'S'`, want: func(v string) string { return v + v + v }},
	{name: "assignment", src: "x=S\nprintf '%s' \"$x\"", want: same},
	{name: "for item", src: `for i in S; do printf '%s' "$i"; done`, want: same},
	{name: "command substitution", src: `printf '%s' "$(printf '%s' "S")"`, want: trimNewlines, expands: true},
	{name: "unquoted here-document", src: "cat <<EOF\nS\nEOF", want: func(v string) string { return v + "\n" }, hdoc: true},
	{name: "here-document with text", src: "cat <<EOF\na $ b 'S' \"c\"\nEOF", want: func(v string) string { return "a $ b '" + v + "' \"c\"\n" }, hdoc: true},
	{name: "quoted here-document", src: "cat <<'EOF'\nS $x\nEOF", want: func(v string) string { return v + " $x\n" }, hdoc: true},
	// <<- strips the leading tabs of every line, the value's too.
	{name: "tab-stripped here-document", src: "cat <<-EOF\n\tS\n\tEOF", want: func(v string) string { return stripTabs(v) + "\n" }, hdoc: true},
	{name: "ANSI-C quotes", src: `printf '%s' $'a\tS'`, want: func(v string) string { return "a\t" + v }, bashOnly: true},
	{name: "[[ == ]]", src: `[[ S == S ]] && printf '%s' ok`, want: func(string) string { return "ok" }, bashOnly: true},
	{name: "here-string", src: `cat <<< S`, want: func(v string) string { return v + "\n" }, bashOnly: true},
}

func trimNewlines(v string) string { return strings.TrimRight(v, "\n") }

// stripTabs removes the leading tabs of each line, as <<- does.
func stripTabs(v string) string {
	lines := strings.Split(v, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}

func (c shellContext) script() string { return strings.ReplaceAll(c.src, "S", testKey) }

// hostileValues are what an attacker sends as input: each would run
// `touch pwned` if it reached the shell as code.
var hostileValues = []string{
	`"; id`,
	`"; id; cat server-config.yaml; echo "`,
	`$(id)`,
	"`id`",
	`"; touch pwned; echo "`,
	`; touch pwned`,
	`$(touch pwned)`,
	"`touch pwned`",
	`'; touch pwned; '`,
	`'`,
	`''`,
	`a[$(touch pwned)]`,
	"line one\ntouch pwned\nline three",
	"crlf\r\nline",
	"\n",
	`\`,
	`\'`,
	`$HOME ${HOME} $((1+1))`,
	"‘smart’ “quotes” ′",
	`*`,
	`~`,
	`-n`,
	"",
	"EOFX",
	"\tEOF ",
	`$'\x41'`,
	`}; touch pwned; {`,
	"\"\"\"''' \\\\\\ $$$ ```",
	strings.Repeat(`a'b"c$(d)`, 100*1024/9),
}

// refusedValues are values no shell can be given in some context: a NUL
// byte anywhere, the delimiter line inside a here-document.
var refusedValues = []string{"EOF", "x\nEOF\ntouch pwned\n", "\tEOF", "a\x00b"}

// refused reports whether Splice must refuse v in context c.
func refused(c shellContext, v string) bool {
	if strings.Contains(v, "\x00") {
		return true
	}
	if !c.hdoc {
		return false
	}
	// The body's lines with the value in place: the first line is the
	// command, the last the delimiter.
	lines := strings.Split(strings.ReplaceAll(c.src, "S", v), "\n")
	for _, line := range lines[1 : len(lines)-1] {
		if line == "EOF" || (strings.HasPrefix(c.src, "cat <<-") && strings.TrimLeft(line, "\t") == "EOF") {
			return true
		}
	}
	return false
}

// TestShellQuotingOnRealShells runs every context with every hostile
// value on bash and dash: each script prints the value back, byte for
// byte, and nothing else runs.
func TestShellQuotingOnRealShells(t *testing.T) {
	for _, shell := range []string{"bash", "dash"} {
		path, err := exec.LookPath(shell)
		if err != nil {
			t.Fatalf("%s is needed for this test: %v", shell, err)
		}
		for _, c := range shellContexts {
			if c.bashOnly && shell != "bash" {
				continue
			}
			for i, v := range append(hostileValues, refusedValues...) {
				out, err := Splice(Shell, c.script(), map[string]any{testKey: v})
				if refused(c, v) {
					var p Problem
					if !errors.As(err, &p) || p.Sentinel != testKey {
						t.Errorf("%s, %s, value %d %.40q: got %v, want the render refused naming the placeholder", shell, c.name, i, v, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s, %s, value %d: %v", shell, c.name, i, err)
					continue
				}
				dir := t.TempDir()
				file := filepath.Join(dir, "script.sh")
				if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(path, file)
				cmd.Dir = dir
				var stderr strings.Builder
				cmd.Stderr = &stderr
				got, err := cmd.Output()
				if err != nil || stderr.Len() > 0 {
					t.Errorf("%s, %s, value %d: %v: %s", shell, c.name, i, err, stderr.String())
				}
				if want := c.want(v); string(got) != want {
					t.Errorf("%s, %s, value %d %.40q: printed %.80q, want %.80q", shell, c.name, i, v, got, want)
				}
				if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
					t.Errorf("%s, %s, value %d %.40q: the value ran as code (pwned exists)", shell, c.name, i, v)
				}
			}
		}
	}
}

// TestShellRefusesValuesNoShellCanHold: a NUL byte anywhere, and the
// delimiter line inside a here-document, fail the render naming the
// placeholder and never the value.
func TestShellRefusesValuesNoShellCanHold(t *testing.T) {
	cases := []struct {
		name, src, value, want string
	}{
		{"NUL in a word", "echo S", "a\x00b", "NUL"},
		{"NUL in a quoted here-document", "cat <<'EOF'\nS\nEOF", "\x00", "NUL"},
		{"delimiter line", "cat <<EOF\nS\nEOF\n", "secret\nEOF\ntouch pwned", `the line "EOF"`},
		{"delimiter as the whole value", "cat <<EOF\nS\nEOF", "EOF", `the line "EOF"`},
		{"delimiter made with the text around", "cat <<EOF\nES\nEOF", "OF", `the line "EOF"`},
		{"tab-stripped delimiter", "cat <<-END\n\tS\nEND", "\t\tEND", `the line "END"`},
		{"quoted delimiter", "cat <<'EOF'\nS\nEOF", "x\nEOF\ny", `the line "EOF"`},
	}
	for _, c := range cases {
		src := strings.ReplaceAll(c.src, "S", testKey)
		_, err := Splice(Shell, src, map[string]any{testKey: c.value})
		var p Problem
		if !errors.As(err, &p) {
			t.Errorf("%s: got %v, want a Problem", c.name, err)
			continue
		}
		if p.Sentinel != testKey || !strings.Contains(p.Message, c.want) {
			t.Errorf("%s: got %+v, want one naming the placeholder and %q", c.name, p, c.want)
		}
		if strings.Contains(p.Message, "secret") || strings.Contains(p.Message, "pwned") {
			t.Errorf("%s: the message shows the value: %s", c.name, p.Message)
		}
	}
}

// TestShellRefusesUnsafeContexts: where even a quoted value runs as
// code, Check and Splice report the placeholder, its offset and why.
func TestShellRefusesUnsafeContexts(t *testing.T) {
	cases := []struct{ src, why string }{
		{"S --version", "command name"},
		{"x=1 S", "command name"},
		{"$(S) arg", "command name"},
		{"echo $(( S + 1 ))", "arithmetic"},
		{"(( n = S ))", "arithmetic"},
		{"let n=S", "arithmetic"},
		{"declare -i n=S", "arithmetic"},
		{"local -i n=S", "arithmetic"},
		{"[[ S -eq 1 ]]", "arithmetic"},
		{"[[ 1 -lt \"S\" ]]", "arithmetic"},
		{"echo ${a[S]}", "parameter expansion"},
		{"a[S]=1", "arithmetic"},
		{"a=([S]=1)", "arithmetic"},
		{"echo \"${v:-S}\"", "parameter expansion"},
		{"echo ${v:S}", "parameter expansion"},
		{"echo ${v/S/x}", "parameter expansion"},
		{"echo $S", "parameter expansion"},
		{"eval \"echo S\"", "eval"},
		{"eval 'S'", "eval"},
		{"bash -c \"echo S\"", "-c"},
		{"sh -c 'echo S'", "-c"},
		{"bash -ec 'S'", "-c"},
		{"sudo -u root sh -c 'echo S'", "-c"},
		{"env A=1 bash -c 'echo S'", "-c"},
		{"ssh host echo S", "ssh"},
		{"\"eval\" S", "eval"},
		{"/bin/sh -c 'S'", "-c"},
		{"find . -exec sh -c 'echo S' \\;", "-c"},
		{"docker run alpine sh -c \"echo S\"", "-c"},
		{"su deploy -c 'echo S'", "program text su"},
		{"python3 -c \"print('S')\"", "program text python3"},
		{"node -e 'console.log(\"S\")'", "program text node"},
		{"awk '{print \"S\"}' file", "program text awk"},
		{"sed -e 's/a/S/' file", "program text sed"},
		{"ssh host \"echo 'S'\"", "ssh"},
		{"case $x in S) ;; esac", "case pattern"},
		{"case $x in a|\"S\") ;; esac", "case pattern"},
		{"echo `echo S`", "backquotes"},
		{"echo \"`echo 'S'`\"", "backquotes"},
		{"trap 'echo S' EXIT", "trap"},
		{"source S", "source"},
		{". ./S.sh", "source"},
		{"read S", "variable"},
		{"printf -v S '%s' x", "variable"},
		{"unset S", "variable"},
		{"for S in a; do :; done", "variable"},
		{"S() { :; }", "variable"},
		{"export S=1", "variable"},
		{"exec S", "command name"},
		{"xargs S < list", "command name"},
		{"echo hi # S", "comment"},
		{"echo \\S", "backslash"},
		{"echo \"\\S\"", "backslash"},
		{"cat <<EOF\n\\S\nEOF", "backslash"},
		{"cat <<S\nx\nS", "delimiter"},
		{"echo @(S)", "glob"},
		{"echo $(( $(echo S) ))", "arithmetic"},
		{"$(echo S)", "command name"},
		{"echo 'unclosed S", "does not parse"},
	}
	for _, c := range cases {
		src := strings.ReplaceAll(c.src, "S", testKey)
		problems := Check(Shell, src, []string{testKey})
		if len(problems) == 0 {
			t.Errorf("%q: no problem found", c.src)
			continue
		}
		p := problems[0]
		if !strings.Contains(p.Message, c.why) {
			t.Errorf("%q: %q, want it to say %q", c.src, p.Message, c.why)
		}
		if c.why != "does not parse" && (p.Sentinel != testKey || p.Offset != strings.Index(src, testKey)) {
			t.Errorf("%q: problem at %q offset %d, want the placeholder at %d", c.src, p.Sentinel, p.Offset, strings.Index(src, testKey))
		}
		if _, err := Splice(Shell, src, map[string]any{testKey: "x"}); err == nil {
			t.Errorf("%q: Splice quoted a value where Check refuses it", c.src)
		}
	}
}

// TestShellAcceptsDataContexts: the same commands with the placeholder
// where it is data pass the check.
func TestShellAcceptsDataContexts(t *testing.T) {
	for _, src := range []string{
		"echo $(( x + 1 )) S", "[[ S == a ]]", "[[ -n S ]]", "declare x=S", "export X=S", "local x=\"S\"",
		"bash ./deploy.sh S", "sudo -u root cp S /tmp", "echo \"$(date) S\"", "x=$(cat <<EOF\nS\nEOF\n)",
		"case S in a) echo S;; esac", "echo ${HOME}/S", "printf '%s\\n' \"S\" >> \"$HOME/S.log\"",
		"if [ S = x ]; then echo S; fi", "f() { echo S; }", "cat <<EOF\n$(echo S)\nEOF",
		"python3 script.py S", "awk '{print $1}' S", "sed -e 's/a/b/' S", "node app.js --name S", "timeout 5 curl -- S",
	} {
		src = strings.ReplaceAll(src, "S", testKey)
		if problems := Check(Shell, src, []string{testKey}); len(problems) > 0 {
			t.Errorf("%q: %v", src, problems)
		}
	}
}

// TestShellNonStringValues: numbers, booleans, nil, lists and maps read
// as the template package writes them in text.
func TestShellNonStringValues(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{3, "'3'"}, {2.5, "'2.5'"}, {4.0, "'4'"}, {true, "'true'"}, {nil, "''"},
		{[]any{"a'b", 1}, `'["a'\''b",1]'`}, {map[string]any{"b": 1, "a": "<&>"}, `'{"a":"<&>","b":1}'`},
	} {
		out, err := Splice(Shell, "echo "+testKey, map[string]any{testKey: c.v})
		if err != nil || out != "echo "+c.want {
			t.Errorf("%v: got %q, %v; want %q", c.v, out, err, "echo "+c.want)
		}
	}
}

// FuzzScriptRender: whatever the value, the spliced script, parsed by a
// shell parser, is the same single command as before and its word
// expands to exactly the value (or Splice refuses the value), and
// nothing panics. The integrator adds the other languages' contexts.
func FuzzScriptRender(f *testing.F) {
	for _, v := range append(hostileValues[:len(hostileValues)-1:len(hostileValues)-1], refusedValues...) {
		for i := range shellContexts {
			f.Add(i, v)
		}
	}
	f.Fuzz(func(t *testing.T, i int, v string) {
		if !utf8.ValidString(v) {
			return // values come from JSON and YAML: always UTF-8
		}
		if i < 0 {
			i = -i
		}
		c := shellContexts[i%len(shellContexts)]
		out, err := Splice(Shell, c.script(), map[string]any{testKey: v})
		if want := refused(c, v); want != (err != nil) {
			t.Fatalf("%s: %q: refused %v, want %v (%v)", c.name, v, err != nil, want, err)
		}
		if err != nil {
			var p Problem
			if !errors.As(err, &p) || p.Sentinel != testKey {
				t.Fatalf("%s: %v is not a Problem naming the placeholder", c.name, err)
			}
			return
		}
		lang := syntax.LangPOSIX
		if c.bashOnly {
			lang = syntax.LangBash
		}
		want, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(strings.ReplaceAll(c.src, "S", "x")), "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := syntax.NewParser(syntax.Variant(lang)).Parse(strings.NewReader(out), "")
		if err != nil {
			t.Fatalf("%s: %q: the spliced script does not parse: %v\n%s", c.name, v, err, out)
		}
		if len(got.Stmts) != len(want.Stmts) {
			t.Fatalf("%s: %q: %d statements, want %d\n%s", c.name, v, len(got.Stmts), len(want.Stmts), out)
		}
		if w, doc, ok := valueWord(got); ok && !c.expands {
			s := literalOf(t, w, doc)
			if strings.HasPrefix(c.src, "cat <<-") {
				s = stripTabs(s)
			}
			// The parser reads CRLF as LF, even quoted (the shells keep
			// the CR, as TestShellQuotingOnRealShells shows).
			want := strings.ReplaceAll(c.want(v), "\r\n", "\n")
			if s != want {
				t.Fatalf("%s: %q: the word reads %q, want %q\n%s", c.name, v, s, want, out)
			}
		}
	})
}

// valueWord finds the word a context prints: printf's argument or the
// here-document's body (doc).
func valueWord(f *syntax.File) (w *syntax.Word, doc, ok bool) {
	if len(f.Stmts) != 1 {
		return nil, false, false
	}
	s := f.Stmts[0]
	for _, r := range s.Redirs {
		if r.Hdoc != nil {
			if _, quoted := hdocDelim(r.Word); quoted {
				// Nothing expands: the body is the text.
				return &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: r.Hdoc.Lit()}}}, false, true
			}
			return r.Hdoc, true, true
		}
	}
	if call, ok := s.Cmd.(*syntax.CallExpr); ok && len(call.Args) == 3 && call.Args[0].Lit() == "printf" {
		return call.Args[2], false, true
	}
	return nil, false, false
}

// literalOf expands a word with no parameter or command allowed in it:
// what the shell reads the quoted value as.
func literalOf(t *testing.T, w *syntax.Word, doc bool) string {
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ParamExp, *syntax.ArithmExp, *syntax.ProcSubst:
			t.Fatalf("the word holds an expansion at %s", n.Pos())
		}
		return true
	})
	cfg := &expand.Config{Env: expand.ListEnviron()}
	if doc {
		s, err := expand.Document(cfg, w)
		if err != nil {
			t.Fatalf("the here-document does not expand: %v", err)
		}
		return s
	}
	fields, err := expand.Fields(cfg, w)
	if err != nil || len(fields) != 1 {
		t.Fatalf("the word expands to %q (%v), want one field", fields, err)
	}
	return fields[0]
}
