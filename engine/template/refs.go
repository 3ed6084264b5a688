package template

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Ref is a variable path a template reads, as far as it is literal:
// `{{ build.output.version }}` reads [build output version], `{{
// input["name"] }}` reads [input name], `{{ input[key] }}` reads [input].
type Ref struct {
	Path []string
	Line int // within the template, 1-based
	Col  int
}

// String writes the path as a template would: build.output.version.
func (r Ref) String() string { return strings.Join(r.Path, ".") }

var (
	getAttrType = reflect.TypeFor[*nodes.GetAttribute]()
	getItemType = reflect.TypeFor[*nodes.GetItem]()
	filteredTyp = reflect.TypeFor[*nodes.FilteredExpression]()
	testExprTyp = reflect.TypeFor[*nodes.TestExpression]()
)

// bindingStructures are the tags that bring names of their own into
// scope (set, for, macro, with, import, call): a template using one may
// read a local where a reader would see a variable.
var bindingStructures = map[string]bool{
	"SetControlStructure": true, "ForControlStructure": true, "MacroControlStructure": true,
	"WithControlStructure": true, "ImportControlStructure": true, "FromImportControlStructure": true,
	"CallControlStructure": true, "boundedMacro": true,
}

// References lists the variable paths src reads, for static checks. It
// reports nothing when src binds names of its own (set, for, macro...),
// and leaves out every path the template guards (`x is defined`, `x is
// none`, `x | default(...)`) along with the paths under it: such a
// template is written to cope with a missing value.
func References(src string) ([]Ref, error) {
	if !IsTemplate(src) {
		return nil, nil
	}
	tpl, err := compile(src)
	if err != nil {
		return nil, err
	}
	c := &refCollector{seen: map[uintptr]bool{}}
	c.walk(reflect.ValueOf(tpl.Root()))
	if c.binds {
		return nil, nil
	}
	var out []Ref
	for _, r := range c.refs {
		if !c.guardedPath(r.Path) {
			out = append(out, r)
		}
	}
	return out, nil
}

type refCollector struct {
	seen    map[uintptr]bool
	refs    []Ref
	guarded [][]string
	binds   bool
}

func (c *refCollector) guardedPath(p []string) bool {
	for _, g := range c.guarded {
		if len(g) <= len(p) && slices.Equal(g, p[:len(g)]) {
			return true
		}
	}
	return false
}

func (c *refCollector) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type() == tokenType || c.seen[v.Pointer()] {
			return
		}
		c.seen[v.Pointer()] = true
		if bindingStructures[v.Type().Elem().Name()] {
			c.binds = true
			return
		}
		switch v.Type() {
		case nameType, getAttrType, getItemType:
			c.chain(v.Interface().(nodes.Node))
			return
		case filteredTyp:
			f := v.Interface().(*nodes.FilteredExpression)
			for _, fc := range f.Filters {
				if fc.Name == "default" || fc.Name == "d" {
					c.guard(f.Expression)
				}
			}
		case testExprTyp:
			t := v.Interface().(*nodes.TestExpression)
			if t.Test != nil {
				switch t.Test.Name {
				case "defined", "undefined", "none":
					c.guard(t.Expression)
				}
			}
		}
		c.walk(v.Elem())
	case reflect.Interface:
		if !v.IsNil() {
			c.walk(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			c.walk(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			c.walk(v.Index(i))
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			c.walk(iter.Value())
		}
	}
}

// guard records the literal path of e, if it is one, as guarded.
func (c *refCollector) guard(e nodes.Expression) {
	if ch := literalPath(e); ch.ok {
		c.guarded = append(c.guarded, ch.path)
	}
}

// chain records the path an attribute or item chain reads and walks what
// else it holds (computed item arguments, a base that is not a name).
func (c *refCollector) chain(n nodes.Node) {
	ch := literalPath(n)
	if ch.ok {
		r := Ref{Path: ch.path}
		if ch.root != nil {
			r.Line, r.Col = ch.root.Line, ch.root.Col
		}
		c.refs = append(c.refs, r)
	}
	for _, a := range ch.args {
		c.walk(reflect.ValueOf(a))
	}
}

// chainPath is what a chain of names, attributes and items reads.
type chainPath struct {
	root   *tokens.Token // the root name
	path   []string      // the literal part, from the root name
	ok     bool          // rooted at a name
	closed bool          // a computed item ended the literal part
	args   []nodes.Node  // computed item arguments, or the base when not ok
}

func literalPath(n nodes.Node) chainPath {
	switch t := n.(type) {
	case *nodes.Name:
		return chainPath{root: t.Name, path: []string{t.Name.Val}, ok: true}
	case *nodes.GetAttribute:
		ch := literalPath(t.Node)
		if ch.ok && !ch.closed {
			if t.Attribute == "" {
				ch.path = append(ch.path, strconv.Itoa(t.Index))
			} else {
				ch.path = append(ch.path, t.Attribute)
			}
		}
		return ch
	case *nodes.GetItem:
		ch := literalPath(t.Node)
		if ch.ok && !ch.closed {
			switch a := t.Arg.(type) {
			case *nodes.String:
				ch.path = append(ch.path, a.Val)
				return ch
			case *nodes.Integer:
				ch.path = append(ch.path, strconv.Itoa(a.Val))
				return ch
			}
		}
		ch.closed = true
		ch.args = append(ch.args, t.Arg)
		return ch
	}
	return chainPath{args: []nodes.Node{n}}
}
