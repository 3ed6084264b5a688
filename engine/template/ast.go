package template

import (
	"reflect"
	"strings"
	"unsafe"

	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var (
	outputType = reflect.TypeFor[*nodes.Output]()
	nameType   = reflect.TypeFor[*nodes.Name]()
	tokenType  = reflect.TypeFor[*tokens.Token]()
	setType    = reflect.TypeFor[*controlstructures.SetControlStructure]()
	forType    = reflect.TypeFor[*controlstructures.ForControlStructure]()
	exprType   = reflect.TypeFor[nodes.Expression]()
)

// singleOutput returns the template's only {{ }} when the template is
// exactly one expression with nothing but whitespace around it; that
// template evaluates to the expression's value instead of text.
func singleOutput(root *nodes.Template) *nodes.Output {
	var found *nodes.Output
	for _, n := range root.Nodes {
		switch t := n.(type) {
		case *nodes.Output:
			if found != nil {
				return nil
			}
			found = t
		case *nodes.Data:
			if t.Data == nil || strings.TrimSpace(t.Data.Val) != "" {
				return nil
			}
		case *nodes.Comment:
		default:
			return nil
		}
	}
	return found
}

// prepare rewrites every {{ }} of the parsed template, wherever it sits (in
// if and for bodies, macros, set blocks...), so its value goes through
// textFilter before gonja prints it; gonja's renderer offers no other hook
// for how values read in text. It also reports whether the template assigns
// into an object (`{% set ns.x = 1 %}`), which could change the caller's
// variables; such templates render on a copy of them.
//
// gonja keeps some bodies in unexported fields, so the walk goes through
// reflection and reaches an Output only through its own pointer. gonja has
// no public way in: nodes.Walk descends only Template and Wrapper nodes
// (any other node is an error), and control structures (set, macro, call,
// with, filter) expose neither their bodies nor their expressions. The
// "gonja:" cases of TestGonjaCanaries pin every field this relies on.
func prepare(root *nodes.Template) (assigns bool) {
	w := walker{seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(root))
	return w.assigns
}

type walker struct {
	seen    map[uintptr]bool
	assigns bool
	// inSet counts the {% set %} blocks around the node being walked: a
	// {{ }} in one builds a variable, not the script (see placeholderFilter).
	inSet int
}

func (w *walker) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type() == tokenType || w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		if v.Type() == setType {
			target := v.Elem().FieldByName("target")
			if target.IsValid() && !target.IsNil() && target.Elem().Type() != nameType {
				w.assigns = true
			}
		}
		if v.Type() == setType {
			w.inSet++
		}
		w.walk(v.Elem())
		if v.Type() == setType {
			w.inSet--
		}
		switch v.Type() {
		case outputType:
			wrapOutput(reflect.NewAt(outputType.Elem(), v.UnsafePointer()).Interface().(*nodes.Output), w.inSet == 0)
		case forType:
			tickLoop(reflect.NewAt(forType.Elem(), v.UnsafePointer()).Interface().(*controlstructures.ForControlStructure))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		w.walk(v.Elem())
		if v.Type() == exprType && v.CanAddr() {
			// Through its address: the field may be unexported.
			field := reflect.NewAt(exprType, unsafe.Pointer(v.UnsafeAddr())).Elem()
			if g := guard(field.Interface().(nodes.Expression)); g != nil {
				field.Set(reflect.ValueOf(&g).Elem())
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			w.walk(v.Field(i))
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i))
		}
	case reflect.Map:
		if v.CanAddr() {
			// Through its address: the field may be unexported.
			v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
		}
		iter := v.MapRange()
		for iter.Next() {
			w.walk(iter.Value())
			if v.Type().Elem() != exprType || iter.Value().IsNil() || !v.CanSet() {
				continue
			}
			if g := guard(iter.Value().Interface().(nodes.Expression)); g != nil {
				v.SetMapIndex(iter.Key(), reflect.ValueOf(&g).Elem())
			}
		}
	}
}

// guard returns what replaces an operator that builds a string or a list
// (`*`, `+`, `~`) so that its size is checked (see Limits), or nil. A
// product is computed by productFilter, which refuses before allocating;
// a sum is at most as large as its operands together, so it is checked
// after.
func guard(e nodes.Expression) nodes.Expression {
	bin, ok := e.(*nodes.BinaryExpression)
	if !ok || bin.Operator == nil || bin.Operator.Token == nil {
		return nil
	}
	switch bin.Operator.Token.Type {
	case tokens.Multiply:
		return &nodes.FilteredExpression{
			Expression: bin.Left,
			Filters:    []*nodes.FilterCall{{Token: bin.Operator.Token, Name: productFilter, Args: []nodes.Expression{bin.Right}}},
		}
	case tokens.Addition, tokens.Tilde:
		return &nodes.FilteredExpression{
			Expression: bin,
			Filters:    []*nodes.FilterCall{{Token: bin.Operator.Token, Name: sizeFilter}},
		}
	}
	return nil
}

// tickLoop makes every iteration of a {% for %} body start with a call of
// tickFilter, which ends a render whose time is up (gonja offers no other
// way in) and counts the body's literal text against the output limit.
func tickLoop(f *controlstructures.ForControlStructure) {
	body := f.BodyWrapper
	if body == nil {
		return
	}
	literal := 0
	for _, n := range body.Nodes {
		if d, ok := n.(*nodes.Data); ok && d.Data != nil {
			literal += len(d.Data.Val)
		}
	}
	tok := &tokens.Token{Type: tokens.Name, Val: tickFilter}
	if body.Location != nil {
		tok.Line, tok.Col, tok.Pos = body.Location.Line, body.Location.Col, body.Location.Pos
	}
	tick := &nodes.Output{
		Start: tok,
		End:   tok,
		Expression: &nodes.FilteredExpression{
			Expression: &nodes.String{Location: tok, Val: ""},
			Filters:    []*nodes.FilterCall{{Token: tok, Name: tickFilter, Args: []nodes.Expression{&nodes.Integer{Location: tok, Val: literal}}}},
		},
	}
	body.Nodes = append([]nodes.Node{tick}, body.Nodes...)
	// gonja goes through the whole list (and its `if`) before the first
	// iteration: check there too, so an abandoned render does not finish
	// that pass (an item failing the check is dropped, then the body's
	// tick fails).
	cond := f.IfCondition
	if cond == nil {
		cond = &nodes.Bool{Location: tok, Val: true}
	}
	f.IfCondition = &nodes.FilteredExpression{
		Expression: cond,
		Filters:    []*nodes.FilterCall{{Token: tok, Name: aliveFilter}},
	}
}

// wrapOutput makes o's value go through textFilter. An output that writes
// into the rendered text (any but those of set blocks) passes its
// position, so that a script render can put a sentinel in its place.
func wrapOutput(o *nodes.Output, placeholder bool) {
	var args []nodes.Expression
	if placeholder && o.Start != nil {
		args = []nodes.Expression{&nodes.Integer{Location: o.Start, Val: o.Start.Pos}}
	}
	o.Expression = withText(o.Expression, args)
	if o.Alternative != nil {
		o.Alternative = withText(o.Alternative, args)
	}
}

func withText(e nodes.Expression, args []nodes.Expression) nodes.Expression {
	if e == nil {
		return nil
	}
	return &nodes.FilteredExpression{
		Expression: e,
		Filters:    []*nodes.FilterCall{{Token: e.Position(), Name: textFilter, Args: args}},
	}
}
