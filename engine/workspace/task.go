package workspace

import (
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

var taskKeys = set("name", "description", "mode", "folder", "input", "flow", "timeout", "on_success", "on_error", "concurrency", "queue")

// stepKeys are a flow step's own keys; any action key beside them makes the
// step an inline action.
var stepKeys = union(set("action", "name", "description", "depends_on", "input", "continue_on_failure", "timeout", "when", "for_each", "sequential"), retryKeys)

var stepAndActionKeys = union(stepKeys, allActionKeys)

var taskModes = set("distributed")

func (l *loader) task(n node) *workflow.Task {
	o, ok := n.object(taskKeys)
	if !ok {
		return nil
	}
	t := &workflow.Task{
		Name:        o.str("name"),
		Description: o.str("description"),
		Mode:        "distributed",
		Folder:      o.str("folder"),
		Flow:        map[string]*workflow.FlowStep{},
	}
	if v, ok := o.get("mode"); ok {
		if m, _ := v.str(); taskModes[m] {
			t.Mode = m
		} else if m != "" {
			v.errorf("unknown mode %q (the only mode is %q)", m, "distributed")
		}
	}
	if v, ok := o.get("input"); ok {
		t.Input = l.inputs(v)
	}
	if v, ok := o.get("timeout"); ok {
		t.Timeout = timeout(v, workflow.MaxTaskTimeout, "7d")
	}
	if v, ok := o.get("concurrency"); ok {
		t.Concurrency = l.concurrency(v)
	}
	if v, ok := o.get("queue"); ok {
		t.Queue = l.queue(v)
	}
	if v, ok := o.get("on_success"); ok {
		t.OnSuccess = l.hookList(v)
	}
	if v, ok := o.get("on_error"); ok {
		t.OnError = l.hookList(v)
	}
	if !o.require("flow") {
		return t
	}
	fv, _ := o.get("flow")
	steps, ok := fv.mapping()
	if ok && len(steps) == 0 {
		fv.errorf("flow has no steps")
	}
	for _, e := range steps {
		if strings.ContainsAny(e.key, "[]") {
			e.k.errorf("step name %q must not contain [ or ] (reserved for for_each instances)", e.key)
		}
		if s := l.step(e.v); s != nil {
			t.Flow[e.key] = s
			t.FlowOrder = append(t.FlowOrder, e.key)
		}
	}
	return t
}

func (l *loader) step(n node) *workflow.FlowStep {
	o, ok := n.object(stepAndActionKeys)
	if !ok {
		return nil
	}
	s := &workflow.FlowStep{
		Name:              o.str("name"),
		Description:       o.str("description"),
		ContinueOnFailure: o.boolean("continue_on_failure"),
		Sequential:        o.boolean("sequential"),
	}
	inline := false
	for _, k := range o.keys {
		if !stepKeys[k] {
			inline = true
			break
		}
	}
	switch {
	case o.has("action") && inline:
		for _, k := range o.keys {
			if !stepKeys[k] {
				o.m[k].k.errorf("inline action field not allowed on a step that names an action")
			}
		}
		s.Action = o.str("action")
	case o.has("action"):
		s.Action = o.str("action")
	case inline:
		s.Inline = l.action(o, true)
	default:
		o.headErrorf("missing required field %q (or inline action fields such as type and script)", "action")
	}
	s.RetrySpec = retrySpec(o)
	if v, ok := o.get("depends_on"); ok {
		s.DependsOn = v.strList()
	}
	if v, ok := o.get("input"); ok {
		s.Input = l.templateValue(v)
	}
	if v, ok := o.get("timeout"); ok {
		s.Timeout = timeout(v, workflow.MaxStepTimeout, "24h")
	}
	if v, ok := o.get("when"); ok {
		s.When, _ = v.text()
		if strings.TrimSpace(s.When) == "" {
			v.errorf("when is empty: give a condition such as \"{{ input.deploy }}\", or remove it")
		}
		l.parseTemplate(v, s.When)
	}
	if v, ok := o.get("for_each"); ok {
		switch fe := v.value().(type) {
		case string:
			s.ForEach = fe
			l.parseTemplate(v, fe)
		case []any:
			s.ForEach = fe
			l.templatesIn(v)
		default:
			v.errorf("expected a template string or a list, got %s", kind(v.resolve()))
		}
	}
	return s
}

// timeout reads a duration no longer than max.
func timeout(n node, max time.Duration, maxText string) workflow.Duration {
	s, ok := n.text()
	if !ok {
		return 0
	}
	d, err := workflow.ParseDuration(s)
	if err != nil {
		n.errorf("%v", err)
		return 0
	}
	if d.Std() > max {
		n.errorf("timeout %s is over the maximum of %s", s, maxText)
		return 0
	}
	if d == 0 {
		n.errorf("timeout must be positive")
	}
	return d
}
