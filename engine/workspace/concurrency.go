package workspace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// MaxConcurrencyLimit caps a task's concurrency limit: a higher one is no
// limit at all and likely a typo.
const MaxConcurrencyLimit = 10000

var concurrencyKeys = set("limit", "key", "on_limit", "priority")

var onLimits = set(workflow.OnLimitQueue, workflow.OnLimitSkip, workflow.OnLimitCancelPrevious)

// concurrency reads a task's `concurrency` block (not a scheduler
// trigger's `concurrency` policy, which is a plain word).
func (l *loader) concurrency(n node) *workflow.Concurrency {
	if s, ok := n.resolve().(*ast.StringNode); ok {
		n.errorf("a task's concurrency is a mapping such as {limit: 1, key: \"{{ input.env }}\"}; %q is a scheduler trigger's concurrency (allow, skip, cancel_previous), set on the trigger", s.Value)
		return nil
	}
	o, ok := n.object(concurrencyKeys)
	if !ok {
		return nil
	}
	c := &workflow.Concurrency{OnLimit: oneOf(o, "on_limit", workflow.OnLimitQueue, onLimits)}
	if o.require("limit") {
		v, _ := o.get("limit")
		if lim, ok := v.integer(); ok {
			if lim < 1 || lim > MaxConcurrencyLimit {
				v.errorf("limit must be between 1 and %d, got %d", MaxConcurrencyLimit, lim)
			} else {
				c.Limit = lim
			}
		}
	}
	if v, ok := o.get("key"); ok {
		c.Key, _ = v.text()
		if strings.TrimSpace(c.Key) == "" {
			v.errorf("key is empty: give a template such as \"{{ input.env }}\", or remove it")
		}
		l.parseTemplate(v, c.Key)
	}
	if v, ok := o.get("priority"); ok {
		c.Priority, _ = v.text()
		if template.IsTemplate(c.Priority) {
			l.parseTemplate(v, c.Priority)
		} else if msg := PriorityProblem(c.Priority); msg != "" {
			v.errorf("%s", msg)
		}
	}
	return c
}

// queue checks a task's `queue` against the server config's queues.
func (l *loader) queue(n node) string {
	name, _ := n.str()
	if name == "" {
		n.errorf("queue is empty: name a queue of the server config's queues, or remove it")
		return ""
	}
	if l.opts.Queues != nil && !slices.Contains(l.opts.Queues, name) {
		known := "none"
		if len(l.opts.Queues) > 0 {
			known = strings.Join(l.opts.Queues, ", ")
		}
		n.errorf("unknown queue %q%s (the server config's queues defines: %s)", name, suggest(name, l.opts.Queues), known)
	}
	return name
}

// PriorityProblem says what is wrong with a rendered priority, or "".
func PriorityProblem(s string) string {
	s = strings.TrimSpace(s)
	p, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Sprintf("priority %q is not an integer (from %d to %d)", s, workflow.MinPriority, workflow.MaxPriority)
	}
	if p < workflow.MinPriority || p > workflow.MaxPriority {
		return fmt.Sprintf("priority %d is out of range (from %d to %d)", p, workflow.MinPriority, workflow.MaxPriority)
	}
	return ""
}
