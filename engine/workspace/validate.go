package workspace

import (
	"fmt"
	"sort"
	"strings"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// templateRoots are template variables a step name must not shadow.
var templateRoots = set("input", "each", "hook", "secret", "secrets", "env")

// validate checks what needs the whole workspace: references between
// actions, tasks, steps and triggers, DAG cycles and webhook names.
func (l *loader) validate() {
	for _, name := range sortedKeys(l.ws.Actions) {
		a := l.ws.Actions[name]
		if a.Type == workflow.TypeTask && a.Task != "" {
			l.checkTaskRef("actions."+name+".task", a.Task)
		}
	}
	for _, name := range sortedKeys(l.ws.Tasks) {
		l.validateTask(name, l.ws.Tasks[name])
	}
	l.checkRefs()
	// In declaration order: the first trigger to claim a webhook name keeps
	// it, and the error is at the later one.
	webhooks := map[string]string{}
	for _, name := range l.ws.TriggerNames() {
		t := l.ws.Triggers[name]
		base := "triggers." + name
		if t.Task != "" {
			l.checkTaskRef(base+".task", t.Task)
		}
		if t.TargetTask != "" {
			l.checkTaskRef(base+".target_task", t.TargetTask)
		}
		if t.Type == workflow.TriggerWebhook && t.WebhookName != "" {
			if prev, dup := webhooks[t.WebhookName]; dup {
				at := ""
				if n, ok := l.nodes["triggers."+prev+".name"]; ok {
					at = " at " + n.pos().String()
				}
				l.errAt(base+".name", fmt.Sprintf("webhook name %q is already used by trigger %q%s", t.WebhookName, prev, at))
			} else {
				webhooks[t.WebhookName] = name
			}
		}
	}
}

func (l *loader) validateTask(name string, t *workflow.Task) {
	base := "tasks." + name
	// Templates see `say-hello` as `say_hello`: two names that meet there
	// would be ambiguous.
	scoped := map[string]string{}
	for _, sn := range t.FlowOrder {
		s := t.Flow[sn]
		sbase := base + ".flow." + sn
		v := strings.ReplaceAll(sn, "-", "_")
		if prev, dup := scoped[v]; dup {
			l.errAtHead(sbase, fmt.Sprintf("steps %q and %q are both %q in templates: rename one", prev, sn, v))
		}
		scoped[v] = sn
		if templateRoots[v] {
			l.errAtHead(sbase, fmt.Sprintf("step name %q is reserved in templates: rename it", sn))
		}
		if s.Action != "" {
			if _, ok := l.ws.Actions[s.Action]; !ok {
				l.errAt(sbase+".action", fmt.Sprintf("unknown action %q%s", s.Action, suggest(s.Action, keysOfMap(l.ws.Actions))))
			}
		}
		if a, ok := l.ws.StepAction(s); ok && noRetryTypes[a.Type] && s.RetrySpec.Written() {
			for _, k := range []string{"retries", "retry_delay", "retry_backoff"} {
				if _, written := l.nodes[sbase+"."+k]; written {
					l.errAtHead(sbase+"."+k, fmt.Sprintf("not allowed for %s actions (they do not retry)", a.Type))
				}
			}
		}
		if s.Inline != nil && s.Inline.Type == workflow.TypeTask && s.Inline.Task != "" {
			l.checkTaskRef(sbase+".task", s.Inline.Task)
		}
		for i, dep := range s.DependsOn {
			if _, ok := t.Flow[dep]; !ok {
				l.errAt(fmt.Sprintf("%s.depends_on[%d]", sbase, i),
					fmt.Sprintf("unknown step %q%s", dep, suggest(dep, t.FlowOrder)))
			}
		}
	}
	for _, cycle := range cycles(t) {
		l.errAt(base+".flow."+cycle[0]+".depends_on", "dependency cycle: "+strings.Join(cycle, " -> "))
	}
}

func (l *loader) checkTaskRef(path, task string) {
	if _, ok := l.ws.Tasks[task]; !ok {
		l.errAt(path, fmt.Sprintf("unknown task %q%s", task, suggest(task, keysOfMap(l.ws.Tasks))))
	}
}

// cycles finds the dependency cycles of a task's flow, each written from
// its first step in file order back to it, e.g. [a b a].
func cycles(t *workflow.Task) [][]string {
	const (
		unvisited = iota
		active
		done
	)
	state := map[string]int{}
	var stack []string
	var out [][]string
	seen := map[string]bool{}
	var visit func(string)
	visit = func(sn string) {
		state[sn] = active
		stack = append(stack, sn)
		deps := append([]string(nil), t.Flow[sn].DependsOn...)
		sort.SliceStable(deps, func(i, j int) bool { return indexOf(t.FlowOrder, deps[i]) < indexOf(t.FlowOrder, deps[j]) })
		for _, dep := range deps {
			if _, ok := t.Flow[dep]; !ok {
				continue
			}
			switch state[dep] {
			case unvisited:
				visit(dep)
			case active:
				i := indexOf(stack, dep)
				cyc := append(append([]string(nil), stack[i:]...), dep)
				// Steps depend on earlier ones; read the cycle the other
				// way, as "runs before": a -> b means b depends on a.
				reverse(cyc)
				key := canonical(cyc)
				if !seen[key] {
					seen[key] = true
					out = append(out, cyc)
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[sn] = done
	}
	for _, sn := range t.FlowOrder {
		if state[sn] == unvisited {
			visit(sn)
		}
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return len(s)
}

func reverse(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// canonical names a cycle independently of where it was entered.
func canonical(cyc []string) string {
	ring := cyc[:len(cyc)-1]
	m := append([]string(nil), ring...)
	sort.Strings(m)
	return strings.Join(m, "\x00")
}
