package workspace

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// maxAliasExpansions bounds alias expansion per file so that a "billion
// laughs" document fails with an error instead of exhausting memory.
const maxAliasExpansions = 10000

// maxDepth bounds nesting so that pathological input cannot overflow the stack.
const maxDepth = 200

// fileCtx is one workflow file being decoded.
type fileCtx struct {
	l       *loader
	name    string // relative to the workspace root
	anchors map[string]ast.Node
	aliases int
}

// node is a YAML node with what an error about it needs: its file and its
// dotted path in the workspace.
type node struct {
	n    ast.Node
	f    *fileCtx
	path string
	key  ast.Node // the mapping key that introduced n, if any
}

// pos is a location in a workflow file.
type pos struct {
	file      string
	line, col int
}

func (n node) pos() pos {
	p := pos{file: n.f.name}
	if n.n == nil {
		return p
	}
	tk := n.n.GetToken()
	switch v := n.n.(type) {
	case *ast.MappingNode:
		// A block mapping's own token is its first ':'; its first key is
		// where a person sees it start.
		if !v.IsFlowStyle && len(v.Values) > 0 && v.Values[0].Key != nil {
			tk = v.Values[0].Key.GetToken()
		}
	case *ast.MappingValueNode:
		if v.Key != nil {
			tk = v.Key.GetToken()
		}
	}
	if tk != nil && tk.Position != nil {
		p.line, p.col = tk.Position.Line, tk.Position.Column
	}
	return p
}

func (n node) errorf(format string, args ...any) {
	n.f.l.addErr(n.pos(), n.path, fmt.Sprintf(format, args...))
}

// headPos is where a person sees the thing n is: its key when it has one
// (`build:`), else the value itself.
func (n node) headPos() pos {
	if n.key != nil {
		return node{n: n.key, f: n.f}.pos()
	}
	return n.pos()
}

// headErrorf reports a problem with n as a whole, such as a missing field.
func (n node) headErrorf(format string, args ...any) {
	n.f.l.addErr(n.headPos(), n.path, fmt.Sprintf(format, args...))
}

// child returns the node for a value under n, recording its position so
// that checks made after decoding can point at it.
func (n node) child(v ast.Node, suffix string) node {
	c := node{n: v, f: n.f, path: n.path + suffix}
	if n.path == "" {
		c.path = strings.TrimPrefix(suffix, ".")
	}
	n.f.l.record(c)
	return c
}

// record remembers the first node seen at a path: a later duplicate
// definition must not move where errors about the first one point.
func (l *loader) record(n node) {
	if _, seen := l.nodes[n.path]; !seen {
		l.nodes[n.path] = n
	}
}

// resolve strips anchors and tags and follows aliases. It returns nil for
// an alias to an unknown anchor (after reporting it).
func (n node) resolve() ast.Node {
	v := n.n
	for i := 0; i < maxDepth && v != nil; i++ {
		switch t := v.(type) {
		case *ast.AnchorNode:
			v = t.Value
		case *ast.TagNode:
			v = t.Value
		case *ast.AliasNode:
			name := ""
			if t.Value != nil {
				name = t.Value.GetToken().Value
			}
			target, ok := n.f.anchors[name]
			if !ok {
				n.errorf("unknown anchor %q", name)
				return nil
			}
			n.f.aliases++
			if n.f.aliases > maxAliasExpansions {
				if n.f.aliases == maxAliasExpansions+1 {
					n.errorf("too many alias expansions (more than %d)", maxAliasExpansions)
				}
				return nil
			}
			v = target
		default:
			return v
		}
	}
	if v != nil {
		n.errorf("anchors and aliases nest too deeply")
	}
	return nil
}

// kind names a node's type for error messages.
func kind(v ast.Node) string {
	switch v.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	}
	return "an unsupported value"
}

// mapEntry is one key of a mapping.
type mapEntry struct {
	key string
	k   node // the key, for errors about the key itself
	v   node
}

// mapping returns the entries of a mapping in file order, with `<<` merge
// keys expanded (explicit keys win). Null is an empty mapping.
func (n node) mapping() ([]mapEntry, bool) {
	return n.mappingDepth(0)
}

func (n node) mappingDepth(depth int) ([]mapEntry, bool) {
	r := n.resolve()
	if r == nil {
		return nil, n.n == nil
	}
	var values []*ast.MappingValueNode
	switch t := r.(type) {
	case *ast.NullNode:
		return nil, true
	case *ast.MappingNode:
		values = t.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{t}
	default:
		n.errorf("expected a mapping, got %s", kind(r))
		return nil, false
	}
	if depth > maxDepth {
		n.errorf("merge keys nest too deeply")
		return nil, false
	}
	explicit := map[string]bool{}
	for _, mv := range values {
		if mv.Key != nil && !mv.Key.IsMergeKey() {
			explicit[n.keyText(mv.Key)] = true
		}
	}
	var out []mapEntry
	seen := map[string]bool{}
	for _, mv := range values {
		if mv.Key == nil {
			continue
		}
		if mv.Key.IsMergeKey() {
			for _, e := range n.mergeEntries(mv.Value, depth) {
				if !explicit[e.key] && !seen[e.key] {
					seen[e.key] = true
					out = append(out, e)
				}
			}
			continue
		}
		key := n.keyText(mv.Key)
		if seen[key] {
			continue
		}
		seen[key] = true
		v := node{n: mv.Value, f: n.f, path: joinPath(n.path, key), key: mv.Key}
		n.f.l.record(v)
		out = append(out, mapEntry{
			key: key,
			k:   node{n: mv.Key, f: n.f, path: v.path},
			v:   v,
		})
	}
	return out, true
}

// mergeEntries expands the value of a `<<` key: a mapping or a list of them.
func (n node) mergeEntries(v ast.Node, depth int) []mapEntry {
	src := node{n: v, f: n.f, path: n.path}
	r := src.resolve()
	if seq, ok := r.(*ast.SequenceNode); ok {
		var out []mapEntry
		for _, item := range seq.Values {
			es, _ := node{n: item, f: n.f, path: n.path}.mappingDepth(depth + 1)
			out = append(out, es...)
		}
		return out
	}
	es, _ := src.mappingDepth(depth + 1)
	return es
}

func (n node) keyText(k ast.Node) string {
	r := node{n: k, f: n.f, path: n.path}.resolve()
	switch t := r.(type) {
	case nil:
		return ""
	case *ast.StringNode:
		return t.Value
	case *ast.MappingKeyNode:
		if t.Value != nil {
			return n.keyText(t.Value)
		}
		return ""
	case ast.ScalarNode:
		return t.GetToken().Value
	}
	return r.String()
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// str returns a string value; other scalars are a type error.
func (n node) str() (string, bool) {
	switch t := n.resolve().(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		if t.Value == nil {
			return "", true
		}
		return t.Value.Value, true
	case nil:
		return "", false
	default:
		n.errorf("expected a string, got %s", kind(t))
		return "", false
	}
}

// text returns any scalar as text: `PORT: 8080` in an env map means "8080".
func (n node) text() (string, bool) {
	switch t := n.resolve().(type) {
	case *ast.StringNode, *ast.LiteralNode:
		return n.str()
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode:
		return t.GetToken().Value, true
	case nil:
		return "", false
	default:
		n.errorf("expected a string, got %s", kind(t))
		return "", false
	}
}

func (n node) boolean() (bool, bool) {
	switch t := n.resolve().(type) {
	case *ast.BoolNode:
		return t.Value, true
	case nil:
		return false, false
	default:
		n.errorf("expected a boolean, got %s", kind(t))
		return false, false
	}
}

func (n node) integer() (int, bool) {
	switch t := n.resolve().(type) {
	case *ast.IntegerNode:
		switch v := t.Value.(type) {
		case int64:
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				return int(v), true
			}
		case uint64:
			if v <= math.MaxInt32 {
				return int(v), true
			}
		}
		n.errorf("integer %s is out of range", t.GetToken().Value)
		return 0, false
	case nil:
		return 0, false
	default:
		n.errorf("expected an integer, got %s", kind(t))
		return 0, false
	}
}

func (n node) number() (float64, bool) {
	switch t := n.resolve().(type) {
	case *ast.IntegerNode:
		switch v := t.Value.(type) {
		case int64:
			return float64(v), true
		case uint64:
			return float64(v), true
		}
	case *ast.FloatNode:
		return t.Value, true
	case nil:
		return 0, false
	}
	n.errorf("expected a number, got %s", kind(n.resolve()))
	return 0, false
}

// list returns the items of a sequence; null is an empty list.
func (n node) list() ([]node, bool) {
	switch t := n.resolve().(type) {
	case *ast.SequenceNode:
		out := make([]node, len(t.Values))
		for i, v := range t.Values {
			out[i] = n.child(v, fmt.Sprintf("[%d]", i))
		}
		return out, true
	case *ast.NullNode:
		return nil, true
	case nil:
		return nil, n.n == nil
	default:
		n.errorf("expected a list, got %s", kind(t))
		return nil, false
	}
}

// strList returns a list of strings; scalars in it are taken as text.
func (n node) strList() []string {
	items, _ := n.list()
	out := make([]string, 0, len(items))
	for _, it := range items {
		if s, ok := it.text(); ok {
			out = append(out, s)
		}
	}
	return out
}

// value converts a node to plain Go values: map[string]any, []any, string,
// int, float64, bool or nil, as JSON would carry them.
func (n node) value() any {
	return n.valueDepth(0)
}

func (n node) valueDepth(depth int) any {
	if depth > maxDepth {
		n.errorf("value nests too deeply")
		return nil
	}
	switch t := n.resolve().(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := n.str()
		return s
	case *ast.BoolNode:
		return t.Value
	case *ast.IntegerNode:
		switch v := t.Value.(type) {
		case int64:
			return int(v)
		case uint64:
			if v <= math.MaxInt64 {
				return int(v)
			}
			return float64(v)
		}
		return nil
	case *ast.FloatNode:
		return t.Value
	case *ast.InfinityNode, *ast.NanNode:
		n.errorf("%s is not a finite number", t.GetToken().Value)
		return nil
	case *ast.SequenceNode:
		items, _ := n.list()
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = it.valueDepth(depth + 1)
		}
		return out
	case *ast.MappingNode, *ast.MappingValueNode:
		es, _ := n.mapping()
		out := make(map[string]any, len(es))
		for _, e := range es {
			out[e.key] = e.v.valueDepth(depth + 1)
		}
		return out
	default:
		n.errorf("unsupported YAML value %s", strconv.Quote(t.GetToken().Value))
		return nil
	}
}

// obj is a mapping whose keys were checked against the allowed set.
type obj struct {
	node
	m    map[string]mapEntry
	keys []string // file order
}

// object reads a mapping whose keys must be among allowed; unknown keys are
// reported with a suggestion. ok is false when n is not a mapping.
func (n node) object(allowed map[string]bool) (obj, bool) {
	es, ok := n.mapping()
	o := obj{node: n, m: map[string]mapEntry{}}
	if !ok {
		return o, false
	}
	for _, e := range es {
		if allowed != nil && !allowed[e.key] {
			e.k.errorf("unknown key%s", suggest(e.key, keysOf(allowed)))
			continue
		}
		o.m[e.key] = e
		o.keys = append(o.keys, e.key)
	}
	return o, true
}

func (o obj) has(key string) bool { _, ok := o.m[key]; return ok }

func (o obj) get(key string) (node, bool) {
	e, ok := o.m[key]
	return e.v, ok
}

func (o obj) str(key string) string {
	if v, ok := o.get(key); ok {
		s, _ := v.str()
		return s
	}
	return ""
}

func (o obj) text(key string) string {
	if v, ok := o.get(key); ok {
		s, _ := v.text()
		return s
	}
	return ""
}

func (o obj) boolean(key string) bool {
	if v, ok := o.get(key); ok {
		b, _ := v.boolean()
		return b
	}
	return false
}

// require reports each missing key at the mapping.
func (o obj) require(keys ...string) bool {
	ok := true
	for _, k := range keys {
		if !o.has(k) {
			o.headErrorf("missing required field %q", k)
			ok = false
		}
	}
	return ok
}

func set(keys ...string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func union(sets ...map[string]bool) map[string]bool {
	m := map[string]bool{}
	for _, s := range sets {
		for k := range s {
			m[k] = true
		}
	}
	return m
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
