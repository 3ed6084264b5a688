package template

import (
	"reflect"
	"strings"

	controlstructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

var (
	outputType = reflect.TypeFor[*nodes.Output]()
	nameType   = reflect.TypeFor[*nodes.Name]()
	tokenType  = reflect.TypeFor[*tokens.Token]()
	setType    = reflect.TypeFor[*controlstructures.SetControlStructure]()
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
// reflection and reaches an Output only through its own pointer.
func prepare(root *nodes.Template) (assigns bool) {
	w := walker{seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(root))
	return w.assigns
}

type walker struct {
	seen    map[uintptr]bool
	assigns bool
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
		w.walk(v.Elem())
		if v.Type() == outputType {
			wrapOutput(reflect.NewAt(outputType.Elem(), v.UnsafePointer()).Interface().(*nodes.Output))
		}
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem())
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
		iter := v.MapRange()
		for iter.Next() {
			w.walk(iter.Value())
		}
	}
}

func wrapOutput(o *nodes.Output) {
	o.Expression = withText(o.Expression)
	if o.Alternative != nil {
		o.Alternative = withText(o.Alternative)
	}
}

func withText(e nodes.Expression) nodes.Expression {
	if e == nil {
		return nil
	}
	return &nodes.FilteredExpression{
		Expression: e,
		Filters:    []*nodes.FilterCall{{Token: e.Position(), Name: textFilter}},
	}
}
