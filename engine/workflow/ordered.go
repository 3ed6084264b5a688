package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// MarshalJSON writes the fields as one JSON object, keys in Order, so that
// the UI shows them as the workflow author arranged them.
func (in *Inputs) MarshalJSON() ([]byte, error) {
	if in == nil {
		return []byte("null"), nil
	}
	return orderedObject(in.keys(), func(k string) any { return in.Fields[k] })
}

// FlowJSON is the task's flow as one JSON object, steps in file order.
func (t *Task) FlowJSON() (json.RawMessage, error) {
	return orderedObject(t.StepOrder(), func(k string) any { return t.Flow[k] })
}

// StepOrder is the task's step names in file order (sorted when the task
// was built by hand without FlowOrder).
func (t *Task) StepOrder() []string { return orderedKeys(t.FlowOrder, t.Flow) }

// TriggerNames is the workspace's trigger names in declaration order
// (sorted when the workspace was built by hand without TriggerOrder).
func (ws *Workspace) TriggerNames() []string { return orderedKeys(ws.TriggerOrder, ws.Triggers) }

// orderedKeys is order when it names every key of m, else m's keys sorted.
func orderedKeys[V any](order []string, m map[string]V) []string {
	if len(order) == len(m) {
		return order
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// orderedObject writes a JSON object whose keys come in the given order
// (encoding/json sorts map keys).
func orderedObject(keys []string, value func(string) any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, fmt.Errorf("encode key: %w", err)
		}
		vb, err := json.Marshal(value(k))
		if err != nil {
			return nil, fmt.Errorf("encode %q: %w", k, err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// keys returns Order, or the sorted field names when Order was not filled in.
func (in *Inputs) keys() []string { return orderedKeys(in.Order, in.Fields) }

// UnmarshalJSON reads a JSON object of field definitions; Order follows
// `order` then the object's key order, as when loading YAML.
func (in *Inputs) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("decode inputs: %w", err)
	}
	if tok == nil {
		*in = Inputs{}
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("decode inputs: expected an object")
	}
	fields := map[string]*InputField{}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decode inputs: %w", err)
		}
		k, _ := tok.(string)
		var f InputField
		if err := dec.Decode(&f); err != nil {
			return fmt.Errorf("decode input %q: %w", k, err)
		}
		if _, dup := fields[k]; !dup {
			keys = append(keys, k)
		}
		fields[k] = &f
	}
	*in = Inputs{Fields: fields, Order: OrderInputs(fields, keys)}
	return nil
}

// OrderInputs sorts keys (given in file order) by their `order`, stably, with
// fields without an order after all those with one.
func OrderInputs(fields map[string]*InputField, keys []string) []string {
	out := append([]string(nil), keys...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := fields[out[i]].Order, fields[out[j]].Order
		switch {
		case a != nil && b != nil:
			return *a < *b
		default:
			return a != nil && b == nil
		}
	})
	return out
}
