package workspace

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// decodeSections decodes what every file contributed, in dependency order:
// secrets feed connections, connection types feed inputs.
func (l *loader) decodeSections() {
	for _, e := range l.raw["secrets"] {
		l.secret(e)
	}
	for _, e := range l.raw["connection_types"] {
		if ct := l.connectionType(e.v); ct != nil {
			l.ws.ConnectionTypes[e.key] = ct
		}
	}
	for _, e := range l.raw["connections"] {
		if c := l.connection(e.v); c != nil {
			l.ws.Connections[e.key] = c
		}
	}
	for _, e := range l.raw["actions"] {
		o, ok := e.v.object(allActionKeys)
		if !ok {
			continue
		}
		if a := l.action(o, false); a != nil {
			l.ws.Actions[e.key] = a
		}
	}
	for _, e := range l.raw["tasks"] {
		if t := l.task(e.v); t != nil {
			l.ws.Tasks[e.key] = t
		}
	}
	for _, e := range l.raw["triggers"] {
		if t := l.trigger(e.key, e.v); t != nil {
			l.ws.Triggers[e.key] = t
			l.ws.TriggerOrder = append(l.ws.TriggerOrder, e.key)
		}
	}
	for _, n := range l.hooks["on_success"] {
		l.ws.OnSuccess = append(l.ws.OnSuccess, l.hookList(n)...)
	}
	for _, n := range l.hooks["on_error"] {
		l.ws.OnError = append(l.ws.OnError, l.hookList(n)...)
	}
}

// secret renders one secret with `env.*` at load time.
func (l *loader) secret(e mapEntry) {
	s, ok := e.v.text()
	if !ok {
		return
	}
	if template.IsTemplate(s) {
		out, err := l.ws.Templates.Render(s, map[string]any{"env": stringMapAny(l.env)})
		if err != nil {
			e.v.errorf("render secret: %v", err)
			return
		}
		s = out
	}
	l.ws.Secrets[e.key] = s
}

func stringMapAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// secretVars are the variables connection values and trigger secrets are
// rendered with at load time.
func (l *loader) secretVars() map[string]any {
	s := stringMapAny(l.ws.Secrets)
	return map[string]any{"secrets": s, "secret": s}
}

// parseTemplate parses s once into the workspace's set when it holds
// template syntax; a parse error is reported at n.
func (l *loader) parseTemplate(n node, s string) {
	if !template.IsTemplate(s) {
		return
	}
	if _, err := l.ws.Templates.Parse(s); err != nil {
		l.addErr(n.templatePos(err), n.path, fmt.Sprintf("invalid template: %v", err))
	}
}

// templateLineCol finds where in its source gonja's parser failed.
var templateLineCol = regexp.MustCompile(`\(Line: (\d+) Col: (\d+)`)

// templatePos is where in the file a template's parse error is: inside a
// one-line scalar or a literal block (`|`), at the failing line and column;
// elsewhere (folded or multi-line flow scalars, whose lines are joined) at
// the scalar itself.
func (n node) templatePos(err error) pos {
	m := templateLineCol.FindStringSubmatch(err.Error())
	if m == nil {
		return n.pos()
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	return n.templateAt(line, col)
}

// templateAt is where in the file line and col of the template n holds
// are, as far as the scalar's style lets columns be counted (see
// templatePos).
func (n node) templateAt(line, col int) pos {
	p := n.pos()
	if p.line == 0 {
		return p
	}
	switch v := n.n.(type) {
	case *ast.StringNode:
		if line != 1 || v.Token == nil || strings.ContainsAny(v.Value, "\n\r") {
			return p
		}
		quoted := v.Token.Type == token.DoubleQuoteType || v.Token.Type == token.SingleQuoteType
		if quoted && strings.ContainsAny(v.Token.Origin, "\\'") {
			return p // escapes shift columns: stay at the scalar
		}
		p.col += col - 1
		if quoted {
			p.col++
		}
	case *ast.LiteralNode:
		if v.Start == nil || !strings.HasPrefix(v.Start.Value, "|") || v.Value == nil || v.Value.Token == nil {
			return p
		}
		lines := strings.Split(v.Value.Token.Origin, "\n")
		if line > len(lines) {
			return p
		}
		indent := 0
		for _, l := range lines {
			if t := strings.TrimLeft(l, " "); t != "" {
				indent = len(l) - len(t)
				break
			}
		}
		p.line = v.Start.Position.Line + line
		p.col = indent + col
	}
	return p
}

// templatesIn parses every string found in n, at any depth.
func (l *loader) templatesIn(n node) {
	l.templatesDepth(n, 0)
}

func (l *loader) templatesDepth(n node, depth int) {
	if depth > maxDepth {
		return
	}
	switch n.resolve().(type) {
	case *ast.StringNode, *ast.LiteralNode:
		if s, ok := n.str(); ok {
			l.parseTemplate(n, s)
		}
	case *ast.SequenceNode:
		items, _ := n.list()
		for _, it := range items {
			l.templatesDepth(it, depth+1)
		}
	case *ast.MappingNode, *ast.MappingValueNode:
		es, _ := n.mapping()
		for _, e := range es {
			l.templatesDepth(e.v, depth+1)
		}
	}
}

// templateMap reads a map of text values (env) and parses each as a template.
func (l *loader) templateMap(n node) map[string]string {
	es, _ := n.mapping()
	if len(es) == 0 {
		return nil
	}
	out := make(map[string]string, len(es))
	for _, e := range es {
		if s, ok := e.v.text(); ok {
			out[e.key] = s
			l.parseTemplate(e.v, s)
		}
	}
	return out
}

// templateValue reads a value whose strings are templates (step and hook
// inputs): the value as plain Go data, its templates parsed.
func (l *loader) templateValue(n node) map[string]any {
	es, ok := n.mapping()
	if !ok || len(es) == 0 {
		return nil
	}
	out := make(map[string]any, len(es))
	for _, e := range es {
		out[e.key] = e.v.value()
		l.templatesIn(e.v)
	}
	return out
}

// Primitive input types; any other type names a connection type.
var primitiveTypes = set("string", "text", "integer", "number", "boolean", "date", "datetime")

var inputFieldKeys = set("type", "name", "description", "required", "secret", "default", "options", "allow_custom", "order")

// inputs reads input field definitions; Order follows `order`, then file order.
func (l *loader) inputs(n node) *workflow.Inputs {
	es, ok := n.mapping()
	if !ok {
		return nil
	}
	in := &workflow.Inputs{Fields: map[string]*workflow.InputField{}}
	var keys []string
	for _, e := range es {
		if f := l.inputField(e.key, e.v, inputFieldKeys, true); f != nil {
			in.Fields[e.key] = f
			keys = append(keys, e.key)
		}
	}
	in.Order = workflow.OrderInputs(in.Fields, keys)
	return in
}

// inputField reads one field definition. Connection-type properties use the
// same shape with fewer keys and primitive types only.
func (l *loader) inputField(key string, n node, allowed map[string]bool, connRefs bool) *workflow.InputField {
	o, ok := n.object(allowed)
	if !ok {
		return nil
	}
	f := &workflow.InputField{Name: key}
	if o.require("type") {
		f.Type = o.str("type")
		tn, _ := o.get("type")
		l.checkFieldType(tn, f.Type, connRefs)
	}
	if o.has("name") {
		f.Name = o.str("name")
	}
	f.Description = o.str("description")
	f.Required = o.boolean("required")
	f.Secret = o.boolean("secret")
	f.AllowCustom = o.boolean("allow_custom")
	if v, ok := o.get("default"); ok {
		f.Default = v.value()
		if s, isStr := f.Default.(string); isStr {
			l.parseTemplate(v, s)
		}
	}
	if v, ok := o.get("options"); ok {
		f.Options = v.strList()
	}
	if dv, ok := o.get("default"); ok && len(f.Options) > 0 && !f.AllowCustom && f.Default != nil {
		// A templated default is known only when it renders.
		if s, isStr := f.Default.(string); !isStr || !template.IsTemplate(s) {
			if err := workflow.CheckOption(f.Default, f.Options); err != nil {
				dv.errorf("default %v (add it to options, or set allow_custom: true)", err)
			}
		}
	}
	if v, ok := o.get("order"); ok {
		if i, ok := v.integer(); ok {
			f.Order = &i
		}
	}
	return f
}

func (l *loader) checkFieldType(n node, typ string, connRefs bool) {
	if typ == "" || primitiveTypes[typ] {
		return
	}
	if connRefs {
		if _, ok := l.ws.ConnectionTypes[typ]; ok {
			return
		}
		cands := append(keysOf(primitiveTypes), keysOfMap(l.ws.ConnectionTypes)...)
		n.errorf("unknown type %q: not a primitive type nor a connection type%s", typ, suggest(typ, cands))
		return
	}
	n.errorf("unknown type %q%s", typ, suggest(typ, keysOf(primitiveTypes)))
}

func sortedKeys[V any](m map[string]V) []string {
	out := keysOfMap(m)
	sort.Strings(out)
	return out
}

func keysOfMap[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

var outputFieldKeys = set("type", "description", "required", "default", "options")
var outputTypes = set("string", "integer", "number", "boolean", "array", "object")

func (l *loader) outputs(n node) map[string]*workflow.OutputField {
	es, ok := n.mapping()
	if !ok || len(es) == 0 {
		return nil
	}
	out := map[string]*workflow.OutputField{}
	for _, e := range es {
		o, ok := e.v.object(outputFieldKeys)
		if !ok {
			continue
		}
		f := &workflow.OutputField{Description: o.str("description"), Required: o.boolean("required")}
		if o.require("type") {
			f.Type = o.str("type")
			if tn, _ := o.get("type"); f.Type != "" && !outputTypes[f.Type] {
				tn.errorf("unknown output type %q%s", f.Type, suggest(f.Type, keysOf(outputTypes)))
			}
		}
		if v, ok := o.get("default"); ok {
			f.Default = v.value()
		}
		if v, ok := o.get("options"); ok {
			if items, ok := v.list(); ok {
				for _, it := range items {
					f.Options = append(f.Options, it.value())
				}
			}
		}
		out[e.key] = f
	}
	return out
}

var hookKeys = set("action", "input")

// hookList reads a list of hooks; action references are checked later.
func (l *loader) hookList(n node) []*workflow.Hook {
	items, _ := n.list()
	var out []*workflow.Hook
	for _, it := range items {
		o, ok := it.object(hookKeys)
		if !ok {
			continue
		}
		h := &workflow.Hook{}
		if o.require("action") {
			h.Action = o.str("action")
			// Actions are all decoded before any hook list is.
			if _, known := l.ws.Actions[h.Action]; h.Action != "" && !known {
				an, _ := o.get("action")
				an.errorf("unknown action %q%s", h.Action, suggest(h.Action, keysOfMap(l.ws.Actions)))
			}
		}
		if v, ok := o.get("input"); ok {
			h.Input = l.templateValue(v)
		}
		out = append(out, h)
	}
	return out
}

var connPropKeys = set("type", "name", "description", "required", "default", "secret")

func (l *loader) connectionType(n node) *workflow.ConnectionType {
	es, ok := n.mapping()
	if !ok {
		return nil
	}
	ct := &workflow.ConnectionType{Properties: map[string]*workflow.InputField{}}
	for _, e := range es {
		if f := l.inputField(e.key, e.v, connPropKeys, false); f != nil {
			ct.Properties[e.key] = f
		}
	}
	return ct
}

// connection reads a connection, renders its values with secrets and checks
// them against its type: required properties, defaults, unknown
// properties and value types.
func (l *loader) connection(n node) *workflow.Connection {
	es, ok := n.mapping()
	if !ok {
		return nil
	}
	c := &workflow.Connection{Values: map[string]any{}}
	valueNodes := map[string]node{}
	var typeNode node
	for _, e := range es {
		if e.key == "type" {
			c.Type, _ = e.v.str()
			typeNode = e.v
			continue
		}
		v := e.v.value()
		if s, isStr := v.(string); isStr && template.IsTemplate(s) {
			out, err := l.ws.Templates.Render(s, l.secretVars())
			if err != nil {
				e.v.errorf("render connection value: %v", err)
				continue
			}
			v = out
		}
		c.Values[e.key] = v
		valueNodes[e.key] = e.v
	}
	if c.Type == "" {
		return c
	}
	ct, ok := l.ws.ConnectionTypes[c.Type]
	if !ok {
		typeNode.errorf("unknown connection type %q%s", c.Type, suggest(c.Type, keysOfMap(l.ws.ConnectionTypes)))
		return c
	}
	for _, e := range es {
		if e.key == "type" {
			continue
		}
		if _, known := ct.Properties[e.key]; !known {
			e.k.errorf("unknown property of connection type %q%s", c.Type, suggest(e.key, keysOfMap(ct.Properties)))
		}
	}
	for _, prop := range sortedKeys(ct.Properties) {
		def := ct.Properties[prop]
		v, present := c.Values[prop]
		if !present {
			if def.Default != nil {
				c.Values[prop] = def.Default
			} else if def.Required {
				n.headErrorf("missing required property %q of connection type %q", prop, c.Type)
			}
			continue
		}
		coerced, err := coerceValue(def.Type, v)
		if err != nil {
			valueNodes[prop].errorf("%v", err)
			continue
		}
		c.Values[prop] = coerced
	}
	return c
}

// coerceValue checks a value against a primitive type. Strings rendered
// from templates are parsed for numeric and boolean types.
func coerceValue(typ string, v any) (any, error) {
	s, isStr := v.(string)
	switch typ {
	case "string", "text", "date", "datetime":
		if !isStr {
			return nil, fmt.Errorf("expected a string for type %s, got %T", typ, v)
		}
	case "integer":
		switch t := v.(type) {
		case int:
			return t, nil
		case string:
			if i, err := strconv.Atoi(s); err == nil {
				return i, nil
			}
		}
		return nil, fmt.Errorf("expected an integer, got %v", v)
	case "number":
		switch t := v.(type) {
		case int, float64:
			return t, nil
		case string:
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return f, nil
			}
		}
		return nil, fmt.Errorf("expected a number, got %v", v)
	case "boolean":
		switch t := v.(type) {
		case bool:
			return t, nil
		case string:
			if b, err := strconv.ParseBool(s); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("expected a boolean, got %v", v)
	}
	return v, nil
}
