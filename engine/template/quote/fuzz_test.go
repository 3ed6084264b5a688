package quote

import (
	"errors"
	"fmt"
	"go/token"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzContext is a script assigning one string literal, with the
// placeholder S in the literal or standing for it.
type fuzzContext struct {
	lang Lang
	src  string
}

var fuzzContexts = []fuzzContext{
	{Python, `x = 'S'`}, {Python, `x = "S"`}, {Python, `x = '''S'''`}, {Python, `x = """S"""`},
	{Python, `x = r'S'`}, {Python, `x = R'''S'''`}, {Python, `x = f'S'`}, {Python, `x = rf"S"`},
	{Python, `x = b'S'`}, {Python, `x = rb'S'`}, {Python, `x = S`},
	{JavaScript, `x = 'S'`}, {JavaScript, `x = "S"`}, {JavaScript, "x = `S`"}, {JavaScript, `x = S`},
	{Go, "package p\nvar x = \"S\""}, {Go, "package p\nvar x = `S`"}, {Go, "package p\nvar x = S"},
}

// FuzzSpliceLanguages: splicing never panics, and a string spliced into a
// string literal (or standing for one) re-lexes as string literals only,
// whose decoded value is the string. Python and javascript refuse, with a
// Problem, only values that are not UTF-8.
func FuzzSpliceLanguages(f *testing.F) {
	for i := range fuzzContexts {
		for _, v := range hostile("/tmp/canary")[:40] {
			f.Add(uint8(i), v)
		}
		f.Add(uint8(i), "\xff\xfe")
	}
	f.Fuzz(func(t *testing.T, ctx uint8, v string) {
		c := fuzzContexts[int(ctx)%len(fuzzContexts)]
		out, err := Splice(c.lang, c.src, map[string]any{"S": v})
		if err != nil {
			var p Problem
			if errors.As(err, &p) && c.lang != Go && !utf8.ValidString(v) {
				return
			}
			t.Fatalf("Splice(%s, %q, %q): %v", c.lang, c.src, v, err)
		}
		if c.lang != Go && strings.ContainsRune(out, 0) {
			t.Fatalf("spliced %s script holds a NUL byte: %q", c.lang, out)
		}
		var got string
		switch c.lang {
		case Python:
			got, err = decodePython(out)
		case JavaScript:
			got, err = decodeJS(out)
		case Go:
			got, err = decodeGo(out)
		}
		if err != nil {
			t.Fatalf("Splice(%s, %q, %q) = %q: %v", c.lang, c.src, v, out, err)
		}
		if got != v {
			t.Fatalf("Splice(%s, %q, %q) = %q, which decodes to %q", c.lang, c.src, v, out, got)
		}
	})
}

// assigned checks that the first two tokens are `x =` and returns the rest.
func assigned(src string, toks []tok) ([]tok, error) {
	if len(toks) < 3 || src[toks[0].start:toks[0].end] != "x" || src[toks[1].start:toks[1].end] != "=" {
		return nil, fmt.Errorf("not `x = ...`")
	}
	return toks[2:], nil
}

// decodePython decodes `x = <adjacent string literals>` as python does.
func decodePython(src string) (string, error) {
	toks, lerr := lexPython(src)
	if lerr != nil {
		return "", fmt.Errorf("%s at %d", lerr.msg, lerr.off)
	}
	rest, err := assigned(src, toks)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	prevEnd := toks[1].end
	for _, t := range rest {
		if t.kind != tkString {
			return "", fmt.Errorf("token %q is not string text", src[t.start:t.end])
		}
		if strings.Trim(src[prevEnd:t.lit.start], " ") != "" {
			return "", fmt.Errorf("%q between literals", src[prevEnd:t.lit.start])
		}
		prevEnd = t.end + len(t.lit.quote)
		s, err := pyDecode(src[t.start:t.end], t.lit)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

func pyDecode(s string, lit *strLit) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case lit.bytes && c >= 0x80:
			return "", fmt.Errorf("non-ASCII byte in a bytes literal")
		case lit.format && (c == '{' || c == '}'):
			if i+1 >= len(s) || s[i+1] != c {
				return "", fmt.Errorf("single %q in an f-string", c)
			}
			b.WriteByte(c)
			i++
		case c != '\\' || lit.raw:
			b.WriteByte(c)
		default:
			i++
			n, err := pyEscapeValue(s[i:], lit.bytes, &b)
			if err != nil {
				return "", err
			}
			i += n - 1
		}
	}
	return b.String(), nil
}

// pyEscapeValue writes the value of the escape whose letter starts s and
// returns its length after the backslash.
func pyEscapeValue(s string, bytes bool, b *strings.Builder) (int, error) {
	simple := map[byte]byte{'\\': '\\', '\'': '\'', '"': '"', 'n': '\n', 'r': '\r', 't': '\t', 'a': 7, 'b': 8, 'f': 12, 'v': 11}
	if c, ok := simple[s[0]]; ok {
		b.WriteByte(c)
		return 1, nil
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[0]]
	if digits == 0 || bytes && s[0] != 'x' {
		return 0, fmt.Errorf("escape \\%c is not one the splicer writes", s[0])
	}
	if len(s) < 1+digits {
		return 0, fmt.Errorf("short escape")
	}
	n, err := strconv.ParseUint(s[1:1+digits], 16, 32)
	if err != nil {
		return 0, err
	}
	if bytes {
		b.WriteByte(byte(n))
	} else {
		b.WriteRune(rune(n))
	}
	return 1 + digits, nil
}

// decodeJS decodes `x = <one string or template literal>` as javascript does.
func decodeJS(src string) (string, error) {
	toks, lerr := lexJS(src)
	if lerr != nil {
		return "", fmt.Errorf("%s at %d", lerr.msg, lerr.off)
	}
	rest, err := assigned(src, toks)
	if err != nil {
		return "", err
	}
	if len(rest) != 1 || rest[0].kind != tkString {
		return "", fmt.Errorf("not one string literal: %d tokens", len(rest))
	}
	s := src[rest[0].start:rest[0].end]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n', 'r', 't':
			b.WriteByte(map[byte]byte{'n': '\n', 'r': '\r', 't': '\t'}[c])
		case 'x', 'u':
			digits := map[byte]int{'x': 2, 'u': 4}[c]
			n, err := strconv.ParseUint(s[i+1:min(i+1+digits, len(s))], 16, 32)
			if err != nil {
				return "", err
			}
			b.WriteRune(rune(n))
			i += digits
		case '\\', '\'', '"', '`', '$', '/':
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("escape \\%c is not one the splicer writes", c)
		}
	}
	return b.String(), nil
}

// decodeGo decodes `var x = <one string literal>` with strconv.Unquote.
func decodeGo(src string) (string, error) {
	toks, errOff, errMsg := lexGo(src)
	if errOff >= 0 {
		return "", fmt.Errorf("%s at %d", errMsg, errOff)
	}
	if len(toks) != 6 || toks[2].tok != token.VAR || toks[5].tok != token.STRING {
		return "", fmt.Errorf("not `package p; var x = <string>`: %d tokens", len(toks))
	}
	return strconv.Unquote(src[toks[5].start:toks[5].end])
}
