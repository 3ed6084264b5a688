package quote

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
	"mvdan.cc/sh/v3/syntax"
)

func init() { splicers[Shell] = shellSplicer{} }

// shellSplicer quotes values for POSIX shells. The worker runs a shell
// script with bash when it has it, else sh (dash, busybox), so the script
// is parsed with bash's grammar (a superset: `[[ -eq ]]`, `(( ))`,
// `declare -i` and array subscripts are arithmetic only in bash, and must
// be seen as such) while every quote written is POSIX: `'...'\”...'`.
type shellSplicer struct{}

// shellCtx is what surrounds a placeholder, and so how its value is quoted.
type shellCtx int

const (
	inWord       shellCtx = iota // a bare word: one single-quoted word
	inDouble                     // "...": closed, one quoted word, reopened
	inSingle                     // '...': each ' of the value closed and reopened
	inANSI                       // bash's $'...': closed, quoted, reopened
	inHdoc                       // unquoted here-document: \ $ ` escaped
	inQuotedHdoc                 // quoted here-document: nothing expands
)

// shellSite is one placeholder found in a script, with its context.
type shellSite struct {
	key  string
	off  int
	ctx  shellCtx
	hdoc *hdocBody // the here-document it stands in, if any
}

// hdocBody is a here-document's body: a value must not end it early.
type hdocBody struct {
	start, end int    // offsets of the body in the script
	delim      string // the delimiter line, as the shell compares it
	dash       bool   // <<-: leading tabs are stripped before comparing
}

func (shellSplicer) check(src string, sentinels []string) []Problem {
	_, problems := analyzeShell(src, sentinels)
	return problems
}

func (shellSplicer) splice(src string, values map[string]any) (string, error) {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sites, problems := analyzeShell(src, keys)
	if len(problems) > 0 {
		return "", problems[0]
	}
	texts := make(map[string]string, len(values))
	for k, v := range values {
		t, err := valuetext.Text(v)
		if err != nil {
			return "", Problem{Sentinel: k, Message: err.Error()}
		}
		if strings.IndexByte(t, 0) >= 0 {
			return "", Problem{Sentinel: k, Message: "its value holds a NUL byte, which no shell string can hold"}
		}
		texts[k] = t
	}
	var b strings.Builder
	b.Grow(len(src))
	// Where each site's text ends up, to tell which value broke a
	// here-document.
	at := make([][2]int, len(sites))
	last := 0
	for i, s := range sites {
		b.WriteString(src[last:s.off])
		at[i][0] = b.Len()
		b.WriteString(quoteFor(s.ctx, texts[s.key]))
		at[i][1] = b.Len()
		last = s.off + len(s.key)
	}
	b.WriteString(src[last:])
	out := b.String()
	if p, bad := brokenHdoc(out, sites, at); bad {
		return "", p
	}
	return out, nil
}

// quoteFor writes v for context ctx.
func quoteFor(ctx shellCtx, v string) string {
	switch ctx {
	case inDouble:
		return `"` + singleQuoted(v) + `"`
	case inSingle:
		return strings.ReplaceAll(v, `'`, `'\''`)
	case inANSI:
		return `'` + singleQuoted(v) + `$'`
	case inHdoc:
		return hdocEscaper.Replace(v)
	case inQuotedHdoc:
		return v
	}
	return singleQuoted(v)
}

// singleQuoted is v as one POSIX word: inside single quotes nothing is
// special but the quote itself, which is closed, escaped and reopened.
func singleQuoted(v string) string {
	return `'` + strings.ReplaceAll(v, `'`, `'\''`) + `'`
}

// hdocEscaper escapes the three characters an unquoted here-document
// expands: `\`, `$` and the backquote.
var hdocEscaper = strings.NewReplacer(`\`, `\\`, `$`, `\$`, "`", "\\`")

// brokenHdoc reports a value that put the delimiter line of its
// here-document into the body, which would end the body there and run
// the rest of the value as commands. at holds where each site's text
// landed in out.
func brokenHdoc(out string, sites []shellSite, at [][2]int) (Problem, bool) {
	// moved maps an offset of the script to the output.
	moved := func(off int) int {
		for i, s := range sites {
			if s.off >= off {
				return off + at[i][0] - s.off
			}
		}
		if len(sites) == 0 {
			return off
		}
		n := len(sites) - 1
		return off + at[n][1] - (sites[n].off + len(sites[n].key))
	}
	checked := map[*hdocBody]bool{}
	for _, s := range sites {
		h := s.hdoc
		if h == nil || checked[h] {
			continue
		}
		checked[h] = true
		start := moved(h.start)
		body := out[start:moved(h.end)]
		for lineStart := 0; lineStart <= len(body); {
			lineEnd := len(body)
			if n := strings.IndexByte(body[lineStart:], '\n'); n >= 0 {
				lineEnd = lineStart + n
			}
			line := body[lineStart:lineEnd]
			if h.dash {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				for k, t := range sites {
					if t.hdoc == h && at[k][0]-start <= lineEnd && at[k][1]-start >= lineStart {
						return Problem{Sentinel: t.key, Offset: t.off, Message: fmt.Sprintf(
							"its value holds the line %q, which ends the here-document it stands in", h.delim)}, true
					}
				}
			}
			lineStart = lineEnd + 1
		}
	}
	return Problem{}, false
}

// analyzeShell finds every occurrence of the keys in src and the context
// each stands in, or a Problem for those no quoting makes safe.
func analyzeShell(src string, keys []string) ([]shellSite, []Problem) {
	hits := findSentinels(src, keys)
	if len(hits) == 0 {
		return nil, nil
	}
	f, err := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash)).
		Parse(strings.NewReader(src), "")
	if err != nil {
		p := Problem{Message: fmt.Sprintf("the script does not parse as a shell script (%v), so its {{ }} values cannot be placed safely", shellParseMessage(err))}
		if pe, ok := err.(syntax.ParseError); ok {
			p.Offset = int(pe.Pos.Offset())
		}
		return nil, []Problem{p}
	}
	w := &shellWalker{src: src, hits: hits, marks: make([]*shellMark, len(hits))}
	w.stmts(f.Stmts)
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.Comment); ok {
			w.danger(c, "it stands in a comment, which a newline in the value would end")
		}
		return true
	})
	var sites []shellSite
	var problems []Problem
	for i, h := range hits {
		m := w.marks[i]
		switch {
		case m == nil:
			problems = append(problems, Problem{Sentinel: h.key, Offset: h.off,
				Message: "it stands where the shell parser finds no word to quote it in"})
		case m.problem != "":
			problems = append(problems, Problem{Sentinel: h.key, Offset: h.off, Message: m.problem})
		default:
			sites = append(sites, shellSite{key: h.key, off: h.off, ctx: m.ctx, hdoc: m.hdoc})
		}
	}
	return sites, problems
}

func shellParseMessage(err error) string {
	if pe, ok := err.(syntax.ParseError); ok {
		return fmt.Sprintf("line %d: %s", pe.Pos.Line(), pe.Text)
	}
	return err.Error()
}

// sentinelHit is one occurrence of a key in the script.
type sentinelHit struct {
	key string
	off int
}

// findSentinels finds every occurrence of the keys in src, in order. The keys a
// renderer makes share a long prefix; scanning for it and then looking
// the candidates up keeps this linear however many placeholders a loop
// made.
func findSentinels(src string, keys []string) []sentinelHit {
	if len(keys) == 0 {
		return nil
	}
	prefix := keys[0]
	lengths := map[int]bool{}
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k == "" {
			continue
		}
		set[k] = true
		lengths[len(k)] = true
		n := 0
		for n < len(prefix) && n < len(k) && prefix[n] == k[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if prefix == "" || len(set) == 0 {
		return nil
	}
	byLen := make([]int, 0, len(lengths))
	for n := range lengths {
		byLen = append(byLen, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(byLen))) // longest first
	var hits []sentinelHit
	for i := 0; i < len(src); {
		n := strings.Index(src[i:], prefix)
		if n < 0 {
			break
		}
		i += n
		matched := 0
		for _, l := range byLen {
			if i+l <= len(src) && set[src[i:i+l]] {
				hits = append(hits, sentinelHit{key: src[i : i+l], off: i})
				matched = l
				break
			}
		}
		if matched == 0 {
			matched = 1
		}
		i += matched
	}
	return hits
}

// shellMark is what the walk decided for one occurrence.
type shellMark struct {
	ctx     shellCtx
	hdoc    *hdocBody
	problem string // set when no quoting is sound there
}

// shellWalker walks a parsed script and marks each occurrence with its context.
type shellWalker struct {
	src   string
	hits  []sentinelHit
	marks []*shellMark
}

// Why a context is refused: each says what the shell does with the value.
const (
	whyCommand    = "it is a command name: the value would be run as a command"
	whyArithmetic = "it is in arithmetic ($(( )), (( )), let, declare -i, [[ -eq ]], an array subscript), where bash runs the $(...) of a value like a[$(id)] however it is quoted"
	whyParamExp   = "it is inside a parameter expansion ${...}, whose operands the shell reads as patterns, arithmetic or words to expand"
	whyEval       = "it is an argument of eval, which runs its arguments as code"
	whyTrap       = "it is an argument of trap, which runs its first argument as code"
	whyShellC     = "it is an argument of a shell run with -c (bash -c, sh -c), which runs that argument as a script"
	whyProgram    = "it is in the program text %s runs (python3 -c, node -e, awk, sed...), where the value becomes code of that language"
	whySSH        = "it is an argument of ssh, which joins its arguments into a command for the remote shell"
	whySource     = "it names the script that source or . runs"
	whyCase       = "it is a case pattern: the shell matches it as a pattern, not as the value"
	whyBackquote  = "it is inside backquotes, whose backslash and quote rules no quoting survives"
	whyName       = "it is a variable, function or file-descriptor name, which must be an identifier (and bash evaluates the subscript of a name like a[$(id)])"
	whyGlob       = "it is inside an extended glob pattern"
	whyHdocDelim  = "it is a here-document's delimiter"
	whyBackslash  = "a backslash right before it would escape the first character of the quoted value"
	whyUnknown    = "it is in a shell construct whose quoting rules appliance does not know"
)

// mark gives every unmarked sentinelHit inside [from, to) context ctx.
func (w *shellWalker) mark(from, to int, m shellMark) {
	// hits are in order: a loop's thousands of placeholders cost a search.
	first := sort.Search(len(w.hits), func(i int) bool { return w.hits[i].off >= from })
	for i := first; i < len(w.hits) && w.hits[i].off < to; i++ {
		h := w.hits[i]
		if w.marks[i] == nil {
			mm := m
			if m.problem == "" && m.ctx != inSingle && m.ctx != inQuotedHdoc && escaped(w.src, h.off) {
				mm.problem = whyBackslash
			}
			w.marks[i] = &mm
		}
	}
}

// escaped reports whether an odd run of backslashes ends right before off.
func escaped(src string, off int) bool {
	n := 0
	for i := off - 1; i >= 0 && src[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func (w *shellWalker) region(n syntax.Node, m shellMark) {
	// A field left out is a typed nil in the interface.
	if n == nil || reflect.ValueOf(n).IsNil() || !n.Pos().IsValid() {
		return
	}
	w.mark(int(n.Pos().Offset()), int(n.End().Offset()), m)
}

func (w *shellWalker) danger(n syntax.Node, why string) {
	w.region(n, shellMark{problem: why})
}

func (w *shellWalker) stmts(stmts []*syntax.Stmt) {
	for _, s := range stmts {
		w.stmt(s)
	}
}

func (w *shellWalker) stmt(s *syntax.Stmt) {
	if s == nil {
		return
	}
	for _, r := range s.Redirs {
		w.redirect(r)
	}
	switch c := s.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		for _, a := range c.Assigns {
			w.assign(a)
		}
		w.call(c.Args)
	case *syntax.IfClause:
		for ; c != nil; c = c.Else {
			w.stmts(c.Cond)
			w.stmts(c.Then)
		}
	case *syntax.WhileClause:
		w.stmts(c.Cond)
		w.stmts(c.Do)
	case *syntax.ForClause:
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			w.danger(l.Name, whyName)
			for _, it := range l.Items {
				w.word(it)
			}
		default:
			w.danger(l, whyArithmetic)
		}
		w.stmts(c.Do)
	case *syntax.CaseClause:
		w.word(c.Word)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				w.danger(p, whyCase)
			}
			w.stmts(it.Stmts)
		}
	case *syntax.Block:
		w.stmts(c.Stmts)
	case *syntax.Subshell:
		w.stmts(c.Stmts)
	case *syntax.BinaryCmd:
		w.stmt(c.X)
		w.stmt(c.Y)
	case *syntax.FuncDecl:
		w.danger(c.Name, whyName)
		w.stmt(c.Body)
	case *syntax.ArithmCmd, *syntax.LetClause:
		w.danger(c, whyArithmetic)
	case *syntax.TestClause:
		w.test(c.X)
	case *syntax.DeclClause:
		w.decl(c)
	case *syntax.TimeClause:
		w.stmt(c.Stmt)
	case *syntax.CoprocClause:
		w.danger(c.Name, whyName)
		w.stmt(c.Stmt)
	default:
		w.danger(c, whyUnknown)
	}
}

func (w *shellWalker) redirect(r *syntax.Redirect) {
	w.danger(r.N, whyName)
	if r.Op != syntax.Hdoc && r.Op != syntax.DashHdoc {
		w.word(r.Word)
		return
	}
	w.danger(r.Word, whyHdocDelim)
	if r.Hdoc == nil {
		return
	}
	delim, quoted := hdocDelim(r.Word)
	h := &hdocBody{start: int(r.Hdoc.Pos().Offset()), end: int(r.Hdoc.End().Offset()), delim: delim, dash: r.Op == syntax.DashHdoc}
	if quoted {
		w.region(r.Hdoc, shellMark{ctx: inQuotedHdoc, hdoc: h})
		return
	}
	for _, p := range r.Hdoc.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			w.region(p, shellMark{ctx: inHdoc, hdoc: h})
		default:
			w.part(p, inHdoc)
		}
	}
}

// hdocDelim is the delimiter line a here-document ends at, and whether
// any quoting in its word makes the body literal.
func hdocDelim(word *syntax.Word) (string, bool) {
	var b strings.Builder
	quoted := false
	for _, p := range word.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.Contains(p.Value, `\`) {
				quoted = true
			}
			b.WriteString(strings.ReplaceAll(p.Value, `\`, ""))
		case *syntax.SglQuoted:
			quoted = true
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			quoted = true
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(l.Value)
				}
			}
		}
	}
	return b.String(), quoted
}

func (w *shellWalker) assign(a *syntax.Assign) {
	w.danger(a.Name, whyName)
	if a.Index != nil {
		w.danger(a.Index, whyArithmetic)
	}
	if a.Naked {
		w.danger(a.Value, whyName)
	} else {
		w.word(a.Value)
	}
	if a.Array != nil {
		for _, e := range a.Array.Elems {
			if e.Index != nil {
				w.danger(e.Index, whyArithmetic)
			}
			w.word(e.Value)
		}
	}
}

// decl walks declare, local, export, readonly, typeset and nameref: with
// -i (integer) every value is arithmetic, with -n a name.
func (w *shellWalker) decl(d *syntax.DeclClause) {
	for _, a := range d.Args {
		if a.Naked && a.Value != nil {
			if lit := a.Value.Lit(); strings.HasPrefix(lit, "-") && strings.ContainsAny(lit, "in") {
				w.danger(d, whyArithmetic)
				return
			}
		}
	}
	if d.Variant != nil && d.Variant.Value == "nameref" {
		w.danger(d, whyName)
		return
	}
	for _, a := range d.Args {
		w.assign(a)
	}
}

func (w *shellWalker) test(x syntax.TestExpr) {
	switch t := x.(type) {
	case *syntax.BinaryTest:
		switch t.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
			w.danger(t, whyArithmetic)
			return
		}
		w.test(t.X)
		w.test(t.Y)
	case *syntax.UnaryTest:
		if t.Op == syntax.TsVarSet || t.Op == syntax.TsRefVar {
			w.danger(t, whyName)
			return
		}
		w.test(t.X)
	case *syntax.ParenTest:
		w.test(t.X)
	case *syntax.Word:
		w.word(t)
	default:
		w.danger(t, whyUnknown)
	}
}

// Commands whose arguments, or some of them, run as code.
var (
	shells = shellWords("sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "busybox")
	// codeFlags are the options after which an interpreter takes program
	// text: `python3 -c "print('{{ x }}')"` is Python code however the
	// shell quotes the value.
	codeFlags = map[string]map[string]bool{
		"su": shellWords("-c"), "python": shellWords("-c"), "python3": shellWords("-c"), "python2": shellWords("-c"),
		"pypy3": shellWords("-c"), "node": shellWords("-e", "--eval", "-p", "--print"), "nodejs": shellWords("-e", "--eval", "-p", "--print"),
		"bun": shellWords("-e", "--eval", "-p", "--print"), "deno": shellWords("eval"), "perl": shellWords("-e", "-E"),
		"ruby": shellWords("-e"), "php": shellWords("-r"),
	}
	// programFirst take their program as the first argument that is not
	// an option (or after -e).
	programFirst = shellWords("awk", "gawk", "mawk", "nawk", "sed", "gsed")
	wrappers     = shellWords("exec", "command", "builtin", "nohup", "env", "sudo", "doas", "xargs", "nice", "timeout", "stdbuf", "setsid", "chroot", "time", "watch")
	// varNames are builtins whose arguments are variable names, in
	// which bash evaluates a subscript: `read 'a[$(id)]'` runs id.
	varNames = shellWords("read", "unset", "getopts", "mapfile", "readarray", "wait")
)

// runsCode reports whether command name runs some of its arguments as code.
func runsCode(name string) bool {
	return name == "eval" || name == "trap" || name == "ssh" || name == "source" || name == "." ||
		shells[name] || codeFlags[name] != nil || programFirst[name] || wrappers[name]
}

func shellWords(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// literal is a word's text when it is all literal (quotes removed), as
// the shell would see it: `"eval"` and `\eval` are eval. A word with an
// expansion in it has none.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				if v[i] == '\\' && i+1 < len(v) {
					i++
				}
				b.WriteByte(v[i])
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// name is a command name as the shell looks it up: `/bin/sh` is sh.
func name(w *syntax.Word) string {
	l, _ := literal(w)
	if i := strings.LastIndexByte(l, '/'); i >= 0 {
		l = l[i+1:]
	}
	return l
}

// call walks a simple command's words: the first is the command name,
// and some commands run some of their arguments as code.
func (w *shellWalker) call(args []*syntax.Word) {
	if len(args) == 0 {
		return
	}
	w.danger(args[0], whyCommand)
	cmd := name(args[0])
	rest := args[1:]
	all := func(why string) {
		for _, a := range rest {
			w.danger(a, why)
		}
	}
	opt := func(i int) string { l, _ := literal(rest[i]); return l }
	switch {
	case cmd == "eval":
		all(whyEval)
	case cmd == "trap":
		all(whyTrap)
	case cmd == "ssh":
		all(whySSH)
	case varNames[cmd]:
		all(whyName)
	case shells[cmd]:
		// With -c the script is an argument; without, the first
		// argument that is not an option names the script to run.
		for i := range rest {
			if l := opt(i); strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "--") && strings.Contains(l, "c") {
				all(whyShellC)
				return
			}
		}
		for i := range rest {
			if !strings.HasPrefix(opt(i), "-") {
				w.danger(rest[i], whySource)
				w.args(rest[i+1:])
				return
			}
		}
	case codeFlags[cmd] != nil:
		for i := range rest {
			if codeFlags[cmd][opt(i)] {
				all(fmt.Sprintf(whyProgram, cmd))
				return
			}
		}
		w.args(rest)
	case programFirst[cmd]:
		w.program(cmd, rest)
	case cmd == "source" || cmd == ".":
		if len(rest) > 0 {
			w.danger(rest[0], whySource)
			w.args(rest[1:])
		}
	case cmd == "printf" || cmd == "test" || cmd == "[":
		// printf -v NAME and test -v NAME take a variable name.
		for i := range rest {
			if opt(i) == "-v" && i+1 < len(rest) {
				w.danger(rest[i+1], whyName)
			}
		}
		w.words(rest)
	case wrappers[cmd]:
		// The wrapped command is the first word that is not an option
		// (or, for env, an assignment); its arguments follow its rules.
		// A wrapper's option that takes a value (sudo -u root) makes the
		// value look like the command, and the real one an argument: args
		// still finds the command that runs code.
		for i := range rest {
			l := opt(i)
			if strings.HasPrefix(l, "-") || (cmd == "env" && strings.Contains(l, "=")) ||
				(cmd == "timeout" && l != "" && strings.Trim(l, "0123456789.smhd") == "") {
				w.word(rest[i])
				continue
			}
			w.call(rest[i:])
			return
		}
	default:
		w.args(rest)
	}
}

// program walks the arguments of awk or sed: the program is the argument
// after each -e, else the first that is not an option; the rest are data.
func (w *shellWalker) program(cmd string, rest []*syntax.Word) {
	why := fmt.Sprintf(whyProgram, cmd)
	explicit := false
	for i, a := range rest {
		if l, _ := literal(a); (l == "-e" || l == "--expression") && i+1 < len(rest) {
			w.danger(rest[i+1], why)
			explicit = true
		}
	}
	for i, a := range rest {
		l, _ := literal(a)
		if !explicit && !strings.HasPrefix(l, "-") {
			w.danger(a, why)
			w.words(rest[i+1:])
			return
		}
		w.word(a)
	}
}

// args walks the arguments of a command that treats them as data, unless
// one of them names a command that runs code with what follows (find
// -exec sh -c, docker run img sh -c, kubectl exec -- python3 -c ...):
// from there the rules of that command apply. Erring on the safe side,
// `echo sh -c x` is refused too.
func (w *shellWalker) args(rest []*syntax.Word) {
	for i, a := range rest {
		if runsCode(name(a)) && !wrappers[name(a)] && i+1 < len(rest) {
			w.words(rest[:i])
			w.call(rest[i:])
			return
		}
	}
	w.words(rest)
}

func (w *shellWalker) words(ws []*syntax.Word) {
	for _, a := range ws {
		w.word(a)
	}
}

// word walks a word used as data: an argument, a value, a file name.
func (w *shellWalker) word(word *syntax.Word) {
	if word == nil {
		return
	}
	for _, p := range word.Parts {
		w.part(p, inWord)
	}
}

// part walks one part of a word; ctx is how a literal in it is quoted.
func (w *shellWalker) part(p syntax.WordPart, ctx shellCtx) {
	switch p := p.(type) {
	case *syntax.Lit:
		w.region(p, shellMark{ctx: ctx})
	case *syntax.SglQuoted:
		if p.Dollar {
			w.region(p, shellMark{ctx: inANSI})
		} else {
			w.region(p, shellMark{ctx: inSingle})
		}
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			w.part(q, inDouble)
		}
	case *syntax.CmdSubst:
		if p.Backquotes {
			w.danger(p, whyBackquote)
			return
		}
		w.stmts(p.Stmts)
	case *syntax.ProcSubst:
		w.stmts(p.Stmts)
	case *syntax.ParamExp:
		w.danger(p, whyParamExp)
	case *syntax.ArithmExp:
		w.danger(p, whyArithmetic)
	case *syntax.ExtGlob:
		w.danger(p, whyGlob)
	default:
		w.danger(p, whyUnknown)
	}
}
