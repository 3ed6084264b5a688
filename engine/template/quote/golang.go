package quote

import (
	"fmt"
	"go/scanner"
	"go/token"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine/template/valuetext"
)

func init() { splicers[Go] = langSplicer{analyze: analyzeGo} }

const goHint = `read the value from the environment instead: os.Getenv("INPUT_NAME")`

// goTok is one token of a go script, as go/scanner lexes it.
type goTok struct {
	tok        token.Token
	start, end int
	importPath bool // a STRING naming an imported package
}

// lexGo scans src with go/scanner. It returns the offset of the first
// lexical error, or -1.
func lexGo(src string) ([]goTok, int, string) {
	fset := token.NewFileSet()
	file := fset.AddFile("script.go", -1, len(src))
	errOff, errMsg := -1, ""
	var s scanner.Scanner
	s.Init(file, []byte(src), func(pos token.Position, msg string) {
		if errOff < 0 {
			errOff, errMsg = pos.Offset, msg
		}
	}, scanner.ScanComments)
	var toks []goTok
	importing, group := false, false
	for {
		pos, tk, lit := s.Scan()
		if tk == token.EOF {
			break
		}
		if tk == token.SEMICOLON && lit != ";" {
			continue // inserted at a line end
		}
		start := file.Offset(pos)
		end := start + len(lit)
		switch {
		case tk == token.COMMENT && strings.HasPrefix(src[start:], "//"):
			end = start + len(src[start:])
			if i := strings.IndexByte(src[start:], '\n'); i >= 0 {
				end = start + i
			}
		case tk == token.COMMENT:
			end = len(src)
			if i := strings.Index(src[start+2:], "*/"); i >= 0 {
				end = start + 2 + i + 2
			}
		case tk == token.STRING && src[start] == '`':
			end = len(src)
			if i := strings.IndexByte(src[start+1:], '`'); i >= 0 {
				end = start + 1 + i + 1
			}
		case lit == "":
			end = start + len(tk.String())
		}
		t := goTok{tok: tk, start: start, end: end}
		switch {
		case tk == token.IMPORT:
			importing, group = true, false
		case importing && tk == token.LPAREN:
			group = true
		case importing && tk == token.STRING:
			t.importPath = true
			importing = group
		case importing && (tk == token.RPAREN || tk == token.SEMICOLON && !group):
			importing = false
		}
		toks = append(toks, t)
	}
	return toks, errOff, errMsg
}

func analyzeGo(src string, sites []site) ([]edit, []Problem) {
	toks, errOff, errMsg := lexGo(src)
	var edits []edit
	var problems []Problem
	bad := func(s site, format string, args ...any) {
		problems = append(problems, s.problem("go: placeholder "+format+"; "+goHint, args...))
	}
	raws := map[int][]site{} // raw strings, by token index: spliced whole
	for _, s := range sites {
		if errOff >= 0 && s.end() > errOff {
			problems = append(problems, afterLexErr(s, &lexErr{off: errOff, msg: errMsg}, "go"))
			continue
		}
		i := goTokAt(toks, s)
		if i < 0 {
			bad(s, "in no token")
			continue
		}
		t := toks[i]
		switch {
		case t.tok == token.COMMENT:
			bad(s, "in a comment, where a line break in the value would end the comment (or a //go: directive would read it)")
		case t.importPath:
			bad(s, "in an import path, which chooses the code that runs")
		case t.tok == token.IDENT && t.start == s.off && t.end == s.end():
			if why := goNamePosition(toks, i); why != "" {
				bad(s, "%s, where a value would be code", why)
				continue
			}
			edits = append(edits, edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
				out, err := goLiteral(values[s.sentinel])
				if err != nil {
					return "", s.problem("go: %v", err)
				}
				return out, nil
			}})
		case t.tok == token.STRING && src[t.start] == '`':
			raws[i] = append(raws[i], s)
		case t.tok == token.STRING:
			if s.overlaps(goEscapes(src[t.start:t.end], t.start)) {
				bad(s, "inside an escape sequence (it follows a backslash)")
				continue
			}
			edits = append(edits, edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
				v, err := valuetext.Text(values[s.sentinel])
				if err != nil {
					return "", err
				}
				q := strconv.Quote(v)
				return q[1 : len(q)-1], nil
			}})
		case t.tok == token.CHAR: // go/scanner has checked it holds one character: the sentinel
			edits = append(edits, edit{start: s.off, end: s.end(), render: func(values map[string]any) (string, error) {
				v, err := valuetext.Text(values[s.sentinel])
				if err != nil {
					return "", err
				}
				r, n := utf8.DecodeRuneInString(v)
				if n == 0 || n != len(v) || r == utf8.RuneError {
					return "", s.problem("go: a rune literal holds exactly one character, and this placeholder's value is %d bytes long; %s", len(v), goHint)
				}
				q := strconv.QuoteRune(r)
				return q[1 : len(q)-1], nil
			}})
		default:
			bad(s, "inside a name or a number, where a value would be code")
		}
	}
	for i, ss := range raws {
		edits = append(edits, goRawEdit(src, toks[i], ss))
	}
	return edits, problems
}

// goRawEdit replaces a raw string holding placeholders with one
// interpreted string of the same text, values included: a raw string
// cannot escape anything, and one literal (rather than `a` + "v" + `b`)
// keeps its precedence and stays valid where only a literal may stand
// (struct tags, constants).
func goRawEdit(src string, t goTok, sites []site) edit {
	return edit{start: t.start, end: t.end, render: func(values map[string]any) (string, error) {
		var b strings.Builder
		at := t.start + 1
		for _, s := range sites {
			v, err := valuetext.Text(values[s.sentinel])
			if err != nil {
				return "", err
			}
			b.WriteString(strings.ReplaceAll(src[at:s.off], "\r", "")) // go drops CRs from raw strings
			b.WriteString(v)
			at = s.end()
		}
		b.WriteString(strings.ReplaceAll(src[at:t.end-1], "\r", ""))
		return strconv.Quote(b.String()), nil
	}}
}

func goTokAt(toks []goTok, s site) int {
	i, found := slices.BinarySearchFunc(toks, s.off, func(t goTok, off int) int { return t.start - off })
	if !found {
		i--
	}
	if i < 0 || s.end() > toks[i].end {
		return -1
	}
	return i
}

// goNamePosition says why the lone name toks[i] must be a name, or "".
func goNamePosition(toks []goTok, i int) string {
	if i == 0 {
		return "as the package clause"
	}
	switch p := toks[i-1].tok; p {
	case token.PERIOD:
		return "after '.' (a selector)"
	case token.FUNC, token.TYPE, token.PACKAGE, token.VAR, token.CONST, token.GOTO, token.BREAK, token.CONTINUE:
		return fmt.Sprintf("after %q (a name)", p)
	}
	return ""
}

// goEscapes returns the escape sequences of the interpreted string lit,
// which starts at offset base.
func goEscapes(lit string, base int) [][2]int {
	var out [][2]int
	for i := 1; i < len(lit)-1; i++ {
		if lit[i] != '\\' {
			continue
		}
		n := 2
		switch lit[i+1] { // the scanner has checked the digits are there
		case 'x':
			n = 4
		case 'u':
			n = 6
		case 'U':
			n = 10
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n = 4
		}
		out = append(out, [2]int{base + i, base + i + n})
		i += n - 1
	}
	return out
}

// goLiteral writes v as a go expression of the type the value has, so it
// compiles wherever an expression may stand and keeps its meaning under
// `:=`: strings and booleans as untyped constants, numbers converted to
// their type (float64(3), so that 3/2 stays 1.5), null as any(nil), lists
// as []any{...} and objects as map[string]any{...} with sorted keys.
func goLiteral(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "any(nil)", nil
	case bool:
		return strconv.FormatBool(t), nil
	case string:
		return strconv.Quote(t), nil
	case int:
		return "int(" + strconv.Itoa(t) + ")", nil
	case int64:
		return "int64(" + strconv.FormatInt(t, 10) + ")", nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return "", fmt.Errorf("go has no constant for %v", t)
		}
		return "float64(" + number(t) + ")", nil
	case []any:
		items, err := listItems(t, goLiteral)
		if err != nil {
			return "", err
		}
		return "[]any{" + items + "}", nil
	case map[string]any:
		parts := make([]string, 0, len(t))
		for _, k := range sortedKeys(t) {
			val, err := goLiteral(t[k])
			if err != nil {
				return "", err
			}
			parts = append(parts, strconv.Quote(k)+": "+val)
		}
		return "map[string]any{" + strings.Join(parts, ", ") + "}", nil
	}
	p, err := plainValue(v)
	if err != nil {
		return "", err
	}
	return goLiteral(p)
}
