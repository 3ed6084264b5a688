package quote

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
)

func init() { splicers[Python] = langSplicer{analyze: analyzePython} }

const pyHint = `read the value from the environment instead: os.environ["INPUT_NAME"]`

// pyLexer tokenizes python 3.12 (PEP 701 f-strings, which also reads every
// 3.11 script): prefixes, triple quotes, escapes, line continuations,
// comments and f-string fields nested to any depth.
type pyLexer struct{ lexer }

func lexPython(src string) ([]tok, *lexErr) {
	l := &pyLexer{lexer{src: src}}
	l.code(false)
	return l.toks, l.err
}

var pyPrefixes = map[string]bool{"r": true, "u": true, "b": true, "br": true, "rb": true, "f": true, "fr": true, "rf": true, "t": true, "tr": true, "rt": true}

// code lexes python code up to the end, or in an f-string field up to the
// '}', ':' or '!' that ends the field's expression, which it returns.
func (l *pyLexer) code(field bool) byte {
	depth := 0
	for l.i < len(l.src) {
		c := l.src[l.i]
		start := l.i
		switch {
		case c == '#':
			for l.i < len(l.src) && l.src[l.i] != '\n' && l.src[l.i] != '\r' {
				l.i++
			}
			l.emit(tok{kind: tkComment, start: start, end: l.i})
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			l.i++
		case c == '\\' && (l.peek(1) == '\n' || l.peek(1) == '\r'):
			l.i += 2
		case c == '\'' || c == '"':
			l.str(start, "")
		case c >= '0' && c <= '9' || c == '.' && l.peek(1) >= '0' && l.peek(1) <= '9':
			l.number()
			l.emit(tok{kind: tkNumber, start: start, end: l.i})
		case field && depth == 0 && (c == '}' || c == ':' || c == '!' && l.peek(1) != '='):
			return c
		default:
			r, n := utf8.DecodeRuneInString(l.src[l.i:])
			if isIdentStart(r) {
				end := l.ident(nil)
				if p := strings.ToLower(l.src[start:end]); pyPrefixes[p] && (l.peek(0) == '\'' || l.peek(0) == '"') {
					l.str(start, p)
					continue
				}
				l.emit(tok{kind: tkIdent, start: start, end: end})
				continue
			}
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			l.i += n
			l.emit(tok{kind: tkPunct, start: start, end: l.i})
		}
	}
	if field {
		l.fail(len(l.src), "unterminated f-string field")
	}
	return 0
}

// str lexes a string literal whose prefix starts at start and whose quote
// is at l.i.
func (l *pyLexer) str(start int, prefix string) {
	q := l.src[l.i : l.i+1]
	if strings.HasPrefix(l.src[l.i:], q+q+q) {
		q += q + q
	}
	lit := &strLit{start: start, prefix: l.src[start:l.i], quote: q,
		raw:    strings.Contains(prefix, "r"),
		bytes:  strings.Contains(prefix, "b"),
		format: strings.ContainsAny(prefix, "ft"),
	}
	l.i += len(q)
	text := l.i
	chunk := func() { l.emit(tok{kind: tkString, start: text, end: l.i, lit: lit}) }
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case strings.HasPrefix(l.src[l.i:], q):
			chunk()
			l.i += len(q)
			return
		case c == '\\':
			n := l.escape(lit)
			lit.escapes = append(lit.escapes, [2]int{l.i, l.i + n})
			l.i += n
		case (c == '\n' || c == '\r') && len(q) == 1:
			l.fail(l.i, "unterminated string")
			return
		case lit.format && c == '{' && l.peek(1) == '{', lit.format && c == '}' && l.peek(1) == '}':
			l.i += 2
		case lit.format && c == '{':
			chunk()
			l.field()
			text = l.i
		case lit.format && c == '}':
			l.fail(l.i, "single '}' in an f-string")
			return
		default:
			l.i++
		}
	}
	l.fail(start, "unterminated string")
}

// escape returns the length of the escape sequence at l.i.
func (l *pyLexer) escape(lit *strLit) int {
	n := 2
	switch c := l.peek(1); {
	case lit.format && (c == '{' || c == '}'):
		n = 1 // the backslash stays, and the brace opens a field all the same
	case lit.raw:
	case c == '\r' && l.peek(2) == '\n':
		n = 3
	case c == 'x':
		n = 4
	case c == 'u' && !lit.bytes:
		n = 6
	case c == 'U' && !lit.bytes:
		n = 10
	case c == 'N' && !lit.bytes && l.peek(2) == '{':
		if j := strings.IndexByte(l.src[l.i:], '}'); j > 0 {
			n = j + 1
		}
	case c >= '0' && c <= '7':
		for n < 4 && l.peek(n) >= '0' && l.peek(n) <= '7' {
			n++
		}
	}
	return escapeLen(l.src[l.i:], n)
}

// field lexes an f-string field from its '{' to its '}', nested fields of
// its format spec included, as one opaque token.
func (l *pyLexer) field() {
	start := l.i
	l.i++
	l.hidden++
	end := l.code(true)
	if end == '!' {
		l.i++
		l.ident(nil)
		end = l.peek(0)
	}
	if end == ':' {
		for l.i++; l.i < len(l.src) && l.src[l.i] != '}'; {
			if l.src[l.i] == '{' {
				l.field()
				continue
			}
			l.i++
		}
	}
	if l.peek(0) != '}' {
		l.fail(start, "unterminated f-string field")
	}
	l.i++
	l.hidden--
	l.emit(tok{kind: tkOpaque, start: start, end: l.i, why: "inside an f-string's {} expression, where a value would be code"})
}

func analyzePython(src string, sites []site) ([]edit, []Problem) {
	toks, lerr := lexPython(src)
	return eachSite(sites, func(s site) (edit, *Problem) { return pySite(src, toks, lerr, s) })
}

func pySite(src string, toks []tok, lerr *lexErr, s site) (edit, *Problem) {
	bad := placeholderProblem(s, "python", pyHint)
	t, p := siteTok(toks, lerr, s, "python", bad)
	if p != nil {
		return edit{}, p
	}
	switch t.kind {
	case tkComment:
		return bad("in a comment, where a newline in the value would end the comment")
	case tkNumber:
		return bad("inside a number")
	case tkIdent:
		if t.start != s.off || t.end != s.end() {
			return bad("inside a name, where a value would be code")
		}
		if why := pyNamePosition(src, toks, t); why != "" {
			return bad("%s, where a value would be code", why)
		}
		return edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
			out, err := pyLiteral(values[s.sentinel])
			if err != nil {
				return "", s.problem("python: %v", err)
			}
			return out, nil
		}}, nil
	case tkString:
		return pyString(src, t, s, bad)
	}
	return bad("where neither a literal nor a string's text can stand")
}

// pyNamePosition says why the lone name t must be a name, or "".
func pyNamePosition(src string, toks []tok, t tok) string {
	prev, ok := prevSig(toks, t)
	if !ok {
		return ""
	}
	switch p := src[prev.start:prev.end]; p {
	case ".":
		return "after '.' (an attribute name)"
	case "def", "class", "as", "global", "nonlocal", "import", "from", "lambda":
		return fmt.Sprintf("after %q (a name)", p)
	case "@":
		if strings.TrimLeft(src[strings.LastIndexByte(src[:prev.start], '\n')+1:prev.start], " \t") == "" {
			return "in a decorator"
		}
	}
	// The first token of t's line says whether the line is an import.
	i, _ := slices.BinarySearchFunc(toks, t.start, func(x tok, off int) int { return x.start - off })
	for i > 0 && !strings.ContainsAny(src[toks[i-1].end:toks[i].start], "\n\r") {
		i--
	}
	if w := src[toks[i].start:toks[i].end]; w == "import" || w == "from" {
		return "in an import"
	}
	return ""
}

// pyString escapes the value for the string literal it stands in.
func pyString(src string, t tok, s site, bad func(string, ...any) (edit, *Problem)) (edit, *Problem) {
	lit := t.lit
	if s.overlaps(lit.escapes) {
		return bad("inside an escape sequence (it follows a backslash)")
	}
	if lit.raw {
		if strings.Contains(lit.prefix, "t") {
			return bad("in a raw t-string, which cannot be closed and reopened around a value")
		}
		if len(lit.quote) == 3 && s.off > t.start && src[s.off-1] == lit.quote[0] && !(site{off: s.off - 1, sentinel: "_"}).overlaps(lit.escapes) {
			return bad("right after a quote in a raw triple-quoted string, which cannot be closed there")
		}
	}
	return edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
		v, err := valuetext.Text(values[s.sentinel])
		if err != nil {
			return "", err
		}
		var body string
		switch {
		case lit.bytes:
			body = pyBytes(v)
		case !utf8.ValidString(v):
			return "", requireUTF8(s, v, "python")
		default:
			body = pyEscape(v, lit.format && !lit.raw)
		}
		if !lit.raw {
			return body, nil
		}
		// A raw string keeps backslashes: close it, put an escaped literal
		// of the same kind beside it (python joins adjacent literals) and
		// reopen it.
		piece := "'" + body + "'"
		if lit.bytes {
			piece = "b" + piece
		}
		return lit.quote + " " + piece + " " + lit.prefix + lit.quote, nil
	}}, nil
}

// pyEscape writes s as the text of a python str literal of any quote.
func pyEscape(s string, braces bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'' || r == '"':
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
		case braces && (r == '{' || r == '}'):
			b.WriteRune(r)
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// pyBytes writes s's bytes as the text of a python bytes literal, which
// holds ASCII only.
func pyBytes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '\'' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// pyLiteral writes v as a python literal. Negative numbers are
// parenthesised so that the literal stays one operand wherever it stands;
// the non-finite floats are written without names anyone could rebind.
func pyLiteral(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "None", nil
	case bool:
		if t {
			return "True", nil
		}
		return "False", nil
	case string:
		if !utf8.ValidString(t) {
			return "", fmt.Errorf("a value is not valid UTF-8, which a python str literal cannot hold byte for byte")
		}
		return "'" + pyEscape(t, false) + "'", nil
	case int:
		return signed(strconv.Itoa(t)), nil
	case int64:
		return signed(strconv.FormatInt(t, 10)), nil
	case float64:
		switch {
		case math.IsNaN(t):
			return "(1e999-1e999)", nil
		case math.IsInf(t, 1):
			return "1e999", nil
		case math.IsInf(t, -1):
			return "(-1e999)", nil
		}
		return signed(number(t)), nil
	case []any:
		items, err := listItems(t, pyLiteral)
		if err != nil {
			return "", err
		}
		return "[" + items + "]", nil
	case map[string]any:
		parts := make([]string, 0, len(t))
		for _, k := range sortedKeys(t) {
			key, err := pyLiteral(k)
			if err != nil {
				return "", err
			}
			val, err := pyLiteral(t[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, key+": "+val)
		}
		return "{" + strings.Join(parts, ", ") + "}", nil
	}
	p, err := plainValue(v)
	if err != nil {
		return "", err
	}
	return pyLiteral(p)
}

// signed wraps a negative number in parentheses.
func signed(n string) string {
	if strings.HasPrefix(n, "-") {
		return "(" + n + ")"
	}
	return n
}
