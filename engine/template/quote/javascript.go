package quote

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
)

func init() {
	splicers[JavaScript] = langSplicer{analyze: analyzeJS}
	splicers[TypeScript] = langSplicer{analyze: analyzeJS}
}

const jsHint = "read the value from the environment instead: process.env.INPUT_NAME"

// jsLexer tokenizes javascript and typescript: comments (HTML-like ones
// too, which node honours in scripts), strings, template literals with
// substitutions nested to any depth, and regular expression literals,
// told from division by the token before them.
type jsLexer struct {
	lexer
	prev     tok    // the last significant token, kept in opaque regions too
	prevText string // its text
	// open holds, per open '(' and '{', whether an expression may start
	// after it closes: after `if (...)` and a block's '}', but not after
	// a call's ')' or an object literal's '}'.
	open      []bool
	openAfter bool // the last ')' or '}' was such a one
}

func lexJS(src string) ([]tok, *lexErr) {
	l := &jsLexer{lexer: lexer{src: src}, prev: tok{kind: -1}}
	if strings.HasPrefix(src, "#!") {
		l.lineComment()
	}
	l.code(false)
	return l.toks, l.err
}

// jsExprKeywords may stand before an expression: after them '/' opens a
// regular expression and '`' an untagged template.
var jsExprKeywords = map[string]bool{"return": true, "typeof": true, "instanceof": true, "in": true, "of": true, "new": true, "delete": true, "void": true, "throw": true, "case": true, "do": true, "else": true, "yield": true, "await": true}

// sig records a significant token.
func (l *jsLexer) sig(t tok) {
	l.emit(t)
	l.prev, l.prevText = t, l.src[t.start:t.end]
}

// exprEnded reports whether the previous token ends an expression, so a
// '/' after it divides and a '`' after it is a tagged template.
func (l *jsLexer) exprEnded() bool {
	switch l.prev.kind {
	case tkIdent:
		return !jsExprKeywords[l.prevText]
	case tkNumber, tkString, tkRegex:
		return true
	case tkPunct:
		switch l.prevText {
		case ")", "}":
			return !l.openAfter
		case "]", "++", "--":
			return true
		}
	}
	return false
}

// exprStarts reports whether an expression starts after the previous
// token, so that a '{' there opens an object literal, not a block.
func (l *jsLexer) exprStarts() bool {
	switch l.prev.kind {
	case tkIdent:
		return jsExprKeywords[l.prevText] && l.prevText != "do" && l.prevText != "else"
	case tkPunct:
		switch l.prevText {
		case ")", "]", "}", ";", "=>":
			return false
		}
		return true
	}
	return false
}

func (l *jsLexer) lineComment() {
	start := l.i
	for l.i < len(l.src) && !isJSNewline(l.src[l.i:]) {
		l.i++
	}
	l.emit(tok{kind: tkComment, start: start, end: l.i})
}

func isJSNewline(s string) bool {
	return s[0] == '\n' || s[0] == '\r' || strings.HasPrefix(s, "\u2028") || strings.HasPrefix(s, "\u2029")
}

// lineStart reports whether only blanks precede l.i on its line.
func (l *jsLexer) lineStart() bool {
	line := l.src[:l.i]
	if i := strings.LastIndexAny(line, "\n\r\u2028\u2029"); i >= 0 {
		line = line[i:]
	}
	return strings.TrimLeftFunc(line, unicode.IsSpace) == ""
}

// code lexes javascript up to the end, or in a template substitution up
// to its closing '}'.
func (l *jsLexer) code(subst bool) {
	depth := 0
	for l.i < len(l.src) {
		c := l.src[l.i]
		start := l.i
		switch {
		case strings.HasPrefix(l.src[l.i:], "//"), strings.HasPrefix(l.src[l.i:], "<!--"),
			strings.HasPrefix(l.src[l.i:], "-->") && l.lineStart():
			l.lineComment()
		case strings.HasPrefix(l.src[l.i:], "/*"):
			end := strings.Index(l.src[l.i+2:], "*/")
			if end < 0 {
				l.fail(l.i, "unterminated comment")
				return
			}
			l.i += end + 4
			l.emit(tok{kind: tkComment, start: start, end: l.i})
		case c == '\'' || c == '"':
			l.str()
		case c == '`':
			l.template()
		case c >= '0' && c <= '9' || c == '.' && l.peek(1) >= '0' && l.peek(1) <= '9':
			l.number()
			l.sig(tok{kind: tkNumber, start: start, end: l.i})
		case c == '/' && !l.exprEnded():
			l.regex()
		case subst && depth == 0 && c == '}':
			return
		default:
			r, n := utf8.DecodeRuneInString(l.src[l.i:])
			switch {
			case unicode.IsSpace(r) || r == '\ufeff':
				l.i += n
				continue
			case isIdentStart(r) || r == '$':
				l.ident(func(r rune) bool { return r == '$' || r == '\u200c' || r == '\u200d' })
				l.sig(tok{kind: tkIdent, start: start, end: l.i})
				continue
			}
			l.i += n
			if rest := l.src[start:]; strings.HasPrefix(rest, "++") || strings.HasPrefix(rest, "--") ||
				strings.HasPrefix(rest, "?.") && !(len(rest) > 2 && rest[2] >= '0' && rest[2] <= '9') {
				l.i = start + 2
			}
			openAfter := false
			switch c {
			case '(':
				l.open = append(l.open, l.prev.kind == tkIdent && (l.prevText == "if" || l.prevText == "while" || l.prevText == "for" || l.prevText == "with"))
			case '{':
				depth++
				l.open = append(l.open, !l.exprStarts())
			case ')', '}':
				if c == '}' {
					depth--
				}
				if k := len(l.open); k > 0 {
					openAfter = l.open[k-1]
					l.open = l.open[:k-1]
				}
			}
			l.sig(tok{kind: tkPunct, start: start, end: l.i})
			l.openAfter = openAfter
		}
	}
	if subst {
		l.fail(len(l.src), "unterminated template substitution")
	}
}

// str lexes a '...' or "..." string.
func (l *jsLexer) str() {
	q := l.src[l.i]
	lit := &strLit{start: l.i, quote: string(q)}
	l.i++
	text := l.i
	for l.i < len(l.src) {
		switch c := l.src[l.i]; {
		case c == q:
			l.sig(tok{kind: tkString, start: text, end: l.i, lit: lit})
			l.i++
			return
		case c == '\\':
			l.escape(lit)
		case c == '\n' || c == '\r':
			l.fail(l.i, "unterminated string")
			return
		default:
			l.i++
		}
	}
	l.fail(lit.start, "unterminated string")
}

// escape consumes the escape sequence at l.i and records it.
func (l *jsLexer) escape(lit *strLit) {
	n := 2
	switch c := l.peek(1); {
	case c == '\r' && l.peek(2) == '\n':
		n = 3
	case c == 'x':
		n = 4
	case c == 'u' && l.peek(2) == '{':
		if j := strings.IndexByte(l.src[l.i:], '}'); j > 0 {
			n = j + 1
		}
	case c == 'u':
		n = 6
	case c >= '0' && c <= '7':
		for n < 4 && l.peek(n) >= '0' && l.peek(n) <= '7' {
			n++
		}
	case c >= 0x80:
		_, size := utf8.DecodeRuneInString(l.src[l.i+1:])
		n = 1 + size
	}
	n = escapeLen(l.src[l.i:], n)
	lit.escapes = append(lit.escapes, [2]int{l.i, l.i + n})
	l.i += n
}

// template lexes a template literal; each substitution is one opaque token.
func (l *jsLexer) template() {
	lit := &strLit{start: l.i, quote: "`", template: true, tagged: l.exprEnded()}
	l.i++
	text := l.i
	chunk := func() { l.emit(tok{kind: tkString, start: text, end: l.i, lit: lit}) }
	for l.i < len(l.src) {
		switch c := l.src[l.i]; {
		case c == '`':
			chunk()
			l.i++
			l.prev, l.prevText = tok{kind: tkString, start: lit.start, end: l.i}, "`"
			return
		case c == '\\':
			l.escape(lit)
		case c == '$' && l.peek(1) == '{':
			chunk()
			start := l.i
			l.i += 2
			l.hidden++
			l.prev = tok{kind: tkPunct, start: start, end: l.i}
			l.prevText = "${"
			l.code(true)
			l.i++
			l.hidden--
			l.emit(tok{kind: tkOpaque, start: start, end: l.i, why: "inside a template literal's ${}, where a value would be code"})
			text = l.i
		default:
			l.i++
		}
	}
	l.fail(lit.start, "unterminated template literal")
}

// regex lexes a regular expression literal.
func (l *jsLexer) regex() {
	start := l.i
	class := false
	for l.i++; l.i < len(l.src); l.i++ {
		switch c := l.src[l.i]; {
		case c == '\\':
			l.i++
		case c == '\n' || c == '\r':
			l.fail(start, "unterminated regular expression")
			return
		case c == '[':
			class = true
		case c == ']':
			class = false
		case c == '/' && !class:
			l.i++
			l.ident(nil)
			l.sig(tok{kind: tkRegex, start: start, end: l.i})
			return
		}
	}
	l.fail(start, "unterminated regular expression")
}

func analyzeJS(src string, sites []site) ([]edit, []Problem) {
	toks, lerr := lexJS(src)
	return eachSite(sites, func(s site) (edit, *Problem) { return jsSite(src, toks, lerr, s) })
}

func jsSite(src string, toks []tok, lerr *lexErr, s site) (edit, *Problem) {
	bad := placeholderProblem(s, "javascript", jsHint)
	t, p := siteTok(toks, lerr, s, "javascript", bad)
	if p != nil {
		return edit{}, p
	}
	switch t.kind {
	case tkComment:
		return bad("in a comment, where a line break in the value would end the comment")
	case tkRegex:
		return bad("in a regular expression literal (use new RegExp(...) on the value)")
	case tkNumber:
		return bad("inside a number")
	case tkIdent:
		if t.start != s.off || t.end != s.end() {
			return bad("inside a name, where a value would be code")
		}
		if prev, ok := prevSig(toks, t); ok {
			switch p := src[prev.start:prev.end]; p {
			case ".", "?.":
				return bad("after %q (a property name)", p)
			case "function", "class", "let", "const", "var", "import", "export", "as", "interface", "type", "enum", "namespace", "module", "@":
				return bad("after %q (a name)", p)
			}
		}
		return edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
			out, err := jsLiteral(values[s.sentinel])
			if err != nil {
				return "", s.problem("javascript: %v", err)
			}
			return out, nil
		}}, nil
	case tkString:
		lit := t.lit
		if s.overlaps(lit.escapes) {
			return bad("inside an escape sequence (it follows a backslash)")
		}
		if lit.tagged {
			return bad("in a tagged template literal, whose tag sees the text unescaped")
		}
		if jsImportPath(src, toks, t) {
			return bad("in a module path, which chooses the code that runs")
		}
		return edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
			v, err := valuetext.Text(values[s.sentinel])
			if err != nil {
				return "", err
			}
			if err := requireUTF8(s, v, "javascript"); err != nil {
				return "", err
			}
			return jsEscape(v), nil
		}}, nil
	}
	return bad("where neither a literal nor a string's text can stand")
}

// jsImportPath reports whether the string t is a module specifier:
// `import "m"`, `from "m"`, `import("m")`, `require("m")`.
func jsImportPath(src string, toks []tok, t tok) bool {
	prev, ok := prevSig(toks, t)
	if !ok {
		return false
	}
	switch src[prev.start:prev.end] {
	case "import", "from":
		return true
	case "(":
		callee, ok := prevSig(toks, prev)
		return ok && (src[callee.start:callee.end] == "import" || src[callee.start:callee.end] == "require")
	}
	return false
}

// jsEscape writes s as the text of a javascript string literal of any
// quote or a template literal: quotes, backquote, '$' and backslash are
// escaped, and every line terminator. '/' is escaped too, so that a
// literal spliced where the lexer saw code but a reader of the script sees
// a regular expression cannot end it.
func jsEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'' || r == '"' || r == '`' || r == '$' || r == '/':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// jsLiteral writes v as a javascript literal. Objects are parenthesised
// (a '{' that starts a statement opens a block), "__proto__" is a computed
// key (a plain one sets the prototype), negative numbers are parenthesised
// and the non-finite ones are written without names anyone could rebind.
func jsLiteral(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "null", nil
	case bool:
		return strconv.FormatBool(t), nil
	case string:
		if !utf8.ValidString(t) {
			return "", fmt.Errorf("a value is not valid UTF-8, which a javascript string literal cannot hold byte for byte")
		}
		return `"` + jsEscape(t) + `"`, nil
	case int:
		return signed(strconv.Itoa(t)), nil
	case int64:
		return signed(strconv.FormatInt(t, 10)), nil
	case float64:
		switch {
		case math.IsNaN(t):
			return "(0/0)", nil
		case math.IsInf(t, 1):
			return "1e999", nil
		case math.IsInf(t, -1):
			return "(-1e999)", nil
		}
		return signed(number(t)), nil
	case []any:
		items, err := listItems(t, jsLiteral)
		if err != nil {
			return "", err
		}
		return "[" + items + "]", nil
	case map[string]any:
		parts := make([]string, 0, len(t))
		for _, k := range sortedKeys(t) {
			key, err := jsLiteral(k)
			if err != nil {
				return "", err
			}
			if k == "__proto__" {
				key = "[" + key + "]"
			}
			val, err := jsLiteral(t[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, key+": "+val)
		}
		return "({" + strings.Join(parts, ", ") + "})", nil
	}
	p, err := plainValue(v)
	if err != nil {
		return "", err
	}
	return jsLiteral(p)
}
