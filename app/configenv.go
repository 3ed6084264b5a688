package app

import (
	"fmt"
	"os"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// expandEnv replaces ${NAME}, ${NAME:-default} and ${NAME:-} in the scalar
// values of a parsed configuration document (never in keys). It runs after
// parsing, so a value can never add structure: whatever the variable holds
// (newlines, colons, "{{", "- x") stays inside the one scalar it was named
// in. An unquoted value that expands to a number, a boolean or null takes
// that type, as it would have had written out; a quoted one stays a string.
// A variable that is unset without a default is an error naming it and its
// line; ${NAME:-default} takes the default when NAME is unset or empty.
func expandEnv(n ast.Node) (ast.Node, error) {
	switch n := n.(type) {
	case nil:
		return nil, nil
	case *ast.DocumentNode:
		body, err := expandEnv(n.Body)
		n.Body = body
		return n, err
	case *ast.MappingNode:
		for _, mv := range n.Values {
			if _, err := expandEnv(mv); err != nil {
				return n, err
			}
		}
		return n, nil
	case *ast.MappingValueNode:
		v, err := expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.SequenceNode:
		for i, v := range n.Values {
			nv, err := expandEnv(v)
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
		v, err := expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.TagNode:
		v, err := expandEnv(n.Value)
		n.Value = v
		return n, err
	case *ast.LiteralNode:
		if n.Value == nil {
			return n, nil
		}
		// A block scalar's text starts on the line after its indicator.
		s, err := expandString(n.Value.Value, n.Start.Position.Line+1, 0)
		if err != nil {
			return n, err
		}
		n.Value.Value = s
		return n, nil
	case *ast.StringNode:
		pos := n.Token.Position
		col := pos.Column
		quoted := n.Token.Type == token.DoubleQuoteType || n.Token.Type == token.SingleQuoteType
		if quoted {
			col++ // past the opening quote
		}
		s, err := expandString(n.Value, pos.Line, col)
		if err != nil || s == n.Value {
			return n, err
		}
		n.Value = s
		if !quoted {
			if typed := plainScalar(s); typed != nil {
				return typed, nil
			}
		}
		return n, nil
	default:
		return n, nil
	}
}

// plainScalar returns the typed node an unquoted s would have parsed to
// when that is a number, a boolean or null; nil for anything else (a
// string, or text that would parse to structure).
func plainScalar(s string) ast.Node {
	if strings.ContainsAny(s, "\n\r") {
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

// expandString expands the references in one scalar. line and col are
// where the scalar's text starts (col 0 when unknown: a block scalar), for
// the error naming an unset variable.
func expandString(s string, line, col int) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	rest := s
	offset := 0 // of rest in s
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			return b.String(), nil
		}
		b.WriteString(rest[:i])
		end := strings.IndexByte(rest[i:], '}')
		at := offset + i
		if end < 0 {
			return "", envError(s, at, line, col, fmt.Sprintf("unterminated %q: want ${NAME} or ${NAME:-default}", rest[i:]))
		}
		ref := rest[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !validEnvName(name) {
			return "", envError(s, at, line, col, fmt.Sprintf("bad reference ${%s}: a name is letters, digits and _ (not starting with a digit), optionally followed by :-default", ref))
		}
		v, set := os.LookupEnv(name)
		switch {
		case hasDef && v == "":
			v = def
		case !set:
			return "", envError(s, at, line, col, fmt.Sprintf("environment variable %s is not set (write ${%s:-} for empty, or ${%s:-default})", name, name, name))
		}
		b.WriteString(v)
		rest = rest[i+end+1:]
		offset = at + end + 1
	}
}

// envError places a message at the reference's line (and column, on a
// one-line scalar) as "line:col: message".
func envError(s string, at, line, col int, msg string) error {
	before := s[:at]
	if nl := strings.Count(before, "\n"); nl > 0 || col == 0 {
		line += nl
		col = at - strings.LastIndexByte(before, '\n')
	} else {
		col += at
	}
	return fmt.Errorf("%d:%d: %s", line, col, msg)
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
