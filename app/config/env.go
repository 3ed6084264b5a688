package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Environment references in configuration files: ${NAME}, ${NAME:-default}
// and ${NAME:-}. They expand inside the scalar value that holds them, after
// parsing, so what a variable holds (newlines, colons, "{{", "- x") can
// never add keys, items or documents:
//
//   - Before parsing, each reference is swapped for a placeholder word, so
//     that `{password: ${PW}}` parses in flow style as it reads (a bare
//     `${` is YAML flow syntax).
//   - After parsing, placeholders in scalar values are replaced by the
//     variable; in keys they go back to the reference's own text (keys are
//     never expanded).
//   - An unquoted value that is exactly one reference takes the type its
//     expansion would have written out (number, boolean, null); a quoted one
//     stays a string.
//   - A variable that is unset with no default is an error naming it and
//     its line and column; ${NAME:-default} takes the default when NAME is
//     unset or empty.
var envRefPattern = regexp.MustCompile(`\$\{[^}\n]*\}|\$\{`) // the second: an unterminated one

// placeholderPattern matches the words references are swapped for.
var placeholderPattern = regexp.MustCompile(`__appliance_env_ref_(\d+)__`)

// envRef is one reference in the file as written.
type envRef struct {
	text      string // ${...}
	line, col int    // where it starts in the file
	pcol      int    // where its placeholder starts in the parsed text
	delta     int    // len(placeholder) - len(text)
}

// envRefs are a file's references, and maps positions in the parsed text
// back to the file.
type envRefs []envRef

// protectEnvRefs swaps every reference in raw for a placeholder.
func protectEnvRefs(raw []byte) ([]byte, envRefs) {
	var refs envRefs
	var out strings.Builder
	line, lineStart, shift := 1, 0, 0 // shift: placeholder growth so far on this line
	last := 0
	for _, m := range envRefPattern.FindAllIndex(raw, -1) {
		for i := last; i < m[0]; i++ {
			if raw[i] == '\n' {
				line, lineStart, shift = line+1, i+1, 0
			}
		}
		ph := "__appliance_env_ref_" + strconv.Itoa(len(refs)) + "__"
		col := m[0] - lineStart + 1
		refs = append(refs, envRef{text: string(raw[m[0]:m[1]]), line: line, col: col, pcol: col + shift, delta: len(ph) - (m[1] - m[0])})
		shift += len(ph) - (m[1] - m[0])
		out.Write(raw[last:m[0]])
		out.WriteString(ph)
		last = m[1]
	}
	out.Write(raw[last:])
	return []byte(out.String()), refs
}

// fileCol maps a column of the parsed text on line back to the file's.
func (refs envRefs) fileCol(line, col int) int {
	out := col
	for _, r := range refs {
		if r.line == line && r.pcol < col {
			out -= r.delta
		}
	}
	return out
}

// restore puts the references' own text back in s.
func (refs envRefs) restore(s string) string {
	return placeholderPattern.ReplaceAllStringFunc(s, func(ph string) string {
		if r, ok := refs.lookup(ph); ok {
			return r.text
		}
		return ph
	})
}

func (refs envRefs) lookup(ph string) (envRef, bool) {
	m := placeholderPattern.FindStringSubmatch(ph)
	if m == nil {
		return envRef{}, false
	}
	i, err := strconv.Atoi(m[1])
	if err != nil || i >= len(refs) {
		return envRef{}, false
	}
	return refs[i], true
}

// expandEnv expands the references in the scalar values under n.
func (refs envRefs) expandEnv(n ast.Node) (ast.Node, error) {
	switch n := n.(type) {
	case nil:
		return nil, nil
	case *ast.DocumentNode:
		body, err := refs.expandEnv(n.Body)
		n.Body = body
		return n, err
	case *ast.MappingNode:
		for _, mv := range n.Values {
			if _, err := refs.expandEnv(mv); err != nil {
				return n, err
			}
		}
		return n, nil
	case *ast.MappingValueNode:
		refs.restoreKey(n.Key)
		v, err := refs.expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.SequenceNode:
		for i, v := range n.Values {
			nv, err := refs.expandEnv(v)
			if err != nil {
				return n, err
			}
			n.Values[i] = nv
			if i < len(n.Entries) && n.Entries[i] != nil {
				n.Entries[i].Value = nv
			}
		}
		return n, nil
	case *ast.AnchorNode:
		v, err := refs.expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.TagNode:
		v, err := refs.expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.LiteralNode:
		if n.Value == nil {
			return n, nil
		}
		s, err := refs.expandString(n.Value.Value)
		if err != nil {
			return n, err
		}
		n.Value.Value = s
		return n, nil
	case *ast.StringNode:
		orig := n.Value
		s, err := refs.expandString(orig)
		if err != nil || s == orig {
			return n, err
		}
		n.Value = s
		plain := n.Token.Type != token.DoubleQuoteType && n.Token.Type != token.SingleQuoteType
		if plain && placeholderPattern.FindString(orig) == strings.TrimSpace(orig) {
			if typed := plainScalar(s); typed != nil {
				if tk := typed.GetToken(); tk != nil {
					tk.Position = n.Token.Position // errors about it point into the file
				}
				return typed, nil
			}
		}
		return n, nil
	default:
		return n, nil
	}
}

// restoreKey gives a key its references' own text back.
func (refs envRefs) restoreKey(k ast.MapKeyNode) {
	if s, ok := k.(*ast.StringNode); ok {
		s.Value = refs.restore(s.Value)
	}
}

// plainScalar returns the typed node an unquoted s would have parsed to
// when that is a number, a boolean or null; nil for anything else (a
// string, or text that would parse to structure).
func plainScalar(s string) ast.Node {
	if s == "" || strings.ContainsAny(s, "\n\r") {
		return nil
	}
	f, err := parser.ParseBytes([]byte(s), 0)
	if err != nil || len(f.Docs) != 1 {
		return nil
	}
	switch n := f.Docs[0].Body.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode:
		return n
	}
	return nil
}

// expandString replaces the placeholders in one scalar's value by what
// their references expand to.
func (refs envRefs) expandString(s string) (string, error) {
	var firstErr error
	out := placeholderPattern.ReplaceAllStringFunc(s, func(ph string) string {
		r, ok := refs.lookup(ph)
		if !ok || firstErr != nil {
			return ph
		}
		v, err := r.expand()
		if err != nil {
			firstErr = err
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// expand is the reference's value in the process environment.
func (r envRef) expand() (string, error) {
	if r.text == "${" {
		return "", fmt.Errorf("%d:%d: unterminated \"${\": want ${NAME} or ${NAME:-default} on one line", r.line, r.col)
	}
	ref := r.text[2 : len(r.text)-1]
	name, def, hasDef := strings.Cut(ref, ":-")
	if !validEnvName(name) {
		return "", fmt.Errorf("%d:%d: bad reference %s: a name is letters, digits and _ (not starting with a digit), optionally followed by :-default", r.line, r.col, r.text)
	}
	v, set := os.LookupEnv(name)
	switch {
	case hasDef && v == "":
		return def, nil
	case !set:
		return "", fmt.Errorf("%d:%d: environment variable %s is not set (write ${%s:-} for empty, or ${%s:-default})", r.line, r.col, name, name, name)
	}
	return v, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
