package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// ParseAgentReply reads the JSON object of a model's reply (the whole
// reply, a fenced ```json block, or the outermost {...}), fills in the
// defaults of absent fields and checks it against schema: an error names
// the offending field.
func ParseAgentReply(text string, schema map[string]any, output map[string]*workflow.OutputField) (map[string]any, error) {
	raw, ok := replyJSON(text)
	if !ok {
		return nil, fmt.Errorf("the reply holds no JSON object: %q", truncate(strings.TrimSpace(text), 200))
	}
	var obj map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("the reply holds no JSON object: %q", truncate(strings.TrimSpace(text), 200))
	}
	for name, f := range output {
		if _, ok := obj[name]; !ok && f.Default != nil {
			obj[name] = f.Default
		}
	}
	sch, err := compileSchema(schema)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	if err := sch.Validate(asJSONValue(obj)); err != nil {
		return nil, fmt.Errorf("the reply does not match the output schema: %s", schemaProblems(err))
	}
	// Numbers as float64, as everywhere else in step outputs.
	var plain map[string]any
	b, _ := json.Marshal(obj)
	_ = json.Unmarshal(b, &plain)
	return plain, nil
}

// replyJSON finds the JSON object in a reply.
func replyJSON(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if i := strings.Index(t, "```"); i >= 0 {
		rest := t[i+3:]
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			lang := strings.TrimSpace(rest[:nl])
			if lang == "" || strings.EqualFold(lang, "json") {
				body := rest[nl+1:]
				if j := strings.Index(body, "```"); j >= 0 {
					return strings.TrimSpace(body[:j]), true
				}
			}
		}
	}
	if strings.HasPrefix(t, "{") {
		return t, true
	}
	i, j := strings.IndexByte(t, '{'), strings.LastIndexByte(t, '}')
	if i >= 0 && j > i {
		return t[i : j+1], true
	}
	return "", false
}

func compileSchema(schema map[string]any) (*jsonschema.Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("output.json")
}

// asJSONValue turns v into what the validator reads (numbers as json.Number).
func asJSONValue(v any) any {
	b, _ := json.Marshal(v)
	out, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return out
}

// schemaProblems names each field the validator objected to.
func schemaProblems(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	p := message.NewPrinter(language.English)
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if r, ok := e.ErrorKind.(*kind.Required); ok && len(e.InstanceLocation) == 0 {
			for _, m := range r.Missing {
				out = append(out, fmt.Sprintf("field %q is required but missing", m))
			}
			return
		}
		field := strings.Join(e.InstanceLocation, ".")
		if field == "" {
			out = append(out, e.ErrorKind.LocalizedString(p))
			return
		}
		out = append(out, fmt.Sprintf("field %q: %s", field, e.ErrorKind.LocalizedString(p)))
	}
	walk(verr)
	sort.Strings(out)
	return strings.Join(out, "; ")
}
