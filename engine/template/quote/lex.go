package quote

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The python and javascript lexers below are hand-written: a placeholder's
// context must be what the interpreter sees, which no regular expression
// over the source can tell (comments, escapes, nested string kinds).
// They only need to find where each token starts and ends and what kind of
// string a text lies in; they do not parse.

type tokKind int

const (
	tkIdent tokKind = iota
	tkNumber
	tkPunct
	tkString  // the text of a string literal between its quotes (or between an f-string's or template's fields)
	tkComment // a comment, hashbang included
	tkRegex   // a javascript regular expression literal
	tkOpaque  // code nested in a string (f-string field, template substitution): no placeholder is sound there
)

type tok struct {
	kind       tokKind
	start, end int
	lit        *strLit // tkString: the literal this text belongs to
	why        string  // tkOpaque: what the region is
}

// strLit is one string literal; several tkString tokens share it when
// fields or substitutions split its text.
type strLit struct {
	start    int    // offset of the prefix or opening quote
	prefix   string // python: the prefix letters, lower-cased
	quote    string // the opening (and closing) quote
	raw      bool   // python r'' (backslashes stay)
	bytes    bool   // python b''
	format   bool   // python f'' or t'': braces delimit fields
	template bool   // javascript `...`
	tagged   bool   // javascript tag`...`: the tag sees the raw text
	escapes  [][2]int
}

// lexErr is where a lexer gave up; placeholders after it have no known
// context.
type lexErr struct {
	off int
	msg string
}

// lexer holds what both hand-written lexers share.
type lexer struct {
	src    string
	i      int
	toks   []tok
	hidden int // > 0 while inside an opaque region: its tokens are not kept
	err    *lexErr
}

func (l *lexer) emit(t tok) {
	if l.hidden == 0 {
		l.toks = append(l.toks, t)
	}
}

func (l *lexer) fail(off int, format string, args ...any) {
	if l.err == nil {
		l.err = &lexErr{off: off, msg: fmt.Sprintf(format, args...)}
	}
	l.i = len(l.src)
}

func (l *lexer) peek(k int) byte {
	if l.i+k < len(l.src) {
		return l.src[l.i+k]
	}
	return 0
}

// ident consumes an identifier starting at l.i and returns its end.
func (l *lexer) ident(extra func(rune) bool) int {
	for l.i < len(l.src) {
		r, n := utf8.DecodeRuneInString(l.src[l.i:])
		if !(isIdentRune(r) || extra != nil && extra(r)) {
			break
		}
		l.i += n
	}
	return l.i
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) }

func isIdentRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r)
}

// number consumes a number literal starting at l.i: digits, letters,
// underscores and dots, and a sign after a decimal exponent.
func (l *lexer) number() {
	start := l.i
	hex := len(l.src) > start+1 && l.src[start] == '0' && (l.src[start+1]|0x20 == 'x')
	for l.i < len(l.src) {
		c := l.src[l.i]
		switch {
		case c == '_' || c == '.' || c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z':
			l.i++
		case (c == '+' || c == '-') && !hex && l.src[l.i-1]|0x20 == 'e':
			l.i++
		default:
			return
		}
	}
}

// at returns the token holding a site, if any.
func at(toks []tok, s site) (tok, bool) {
	i, found := slices.BinarySearchFunc(toks, s.off, func(t tok, off int) int { return t.start - off })
	if !found {
		i--
	}
	if i < 0 || s.end() > toks[i].end {
		return tok{}, false
	}
	return toks[i], true
}

// prevSig returns the token before t that is not a comment.
func prevSig(toks []tok, t tok) (tok, bool) {
	i, _ := slices.BinarySearchFunc(toks, t.start, func(x tok, off int) int { return x.start - off })
	for i--; i >= 0; i-- {
		if toks[i].kind != tkComment {
			return toks[i], true
		}
	}
	return tok{}, false
}

// badSite answers a placeholder that may not stand where it does.
type badSite = func(format string, args ...any) (edit, *Problem)

// placeholderProblem is a language's badSite: the problem names the
// language and ends with its hint.
func placeholderProblem(s site, lang, hint string) badSite {
	return func(format string, args ...any) (edit, *Problem) {
		p := s.problem(lang+": placeholder "+format+"; "+hint, args...)
		return edit{}, &p
	}
}

// siteTok is the token a placeholder stands in, or the problem of one
// that stands past the lexer's error, in no token or in one the lexer made
// opaque (t.why says why).
func siteTok(toks []tok, lerr *lexErr, s site, lang string, bad badSite) (tok, *Problem) {
	if lerr != nil && s.end() > lerr.off {
		p := afterLexErr(s, lerr, lang)
		return tok{}, &p
	}
	t, ok := at(toks, s)
	if !ok {
		_, p := bad("in no token")
		return tok{}, p
	}
	if t.kind == tkOpaque {
		_, p := bad("%s", t.why)
		return tok{}, p
	}
	return t, nil
}

// afterLexErr is the Problem of a site the lexer never reached.
func afterLexErr(s site, e *lexErr, lang string) Problem {
	return s.problem("the script does not lex as %s (%s at byte %d), so this placeholder's context is unknown; fix the script", lang, e.msg, e.off)
}

// escapeLen clips the nominal length n of the escape sequence that starts
// s (\x41, \u{1F600}, \N{DASH}, \101...) before a quote, backslash or line
// break: a malformed escape then still covers a placeholder that stands
// where its digits should be, and never swallows the closing quote.
func escapeLen(s string, n int) int {
	n = min(n, len(s))
	if n <= 2 || !isAlnum(s[1]) {
		return n
	}
	if i := strings.IndexAny(s[2:n], "'\"`\\\n\r"); i >= 0 {
		return 2 + i
	}
	return n
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'z'
}
