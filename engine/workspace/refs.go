package workspace

import (
	"fmt"
	"sort"
	"strings"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/goccy/go-yaml/ast"
)

// Static checks of what templates read (see template.References): a
// reference to an input that is not declared, to a step that is not
// upstream (whose output a template can never see), or to an output field
// the step's action declares it does not have. Each would fail at run
// time, after a job has started; here they fail at load, with the place.
//
// What `input` means where (the README's "Template scopes" table):
//   - in a flow step's `input` values, `when` and `for_each`, and in a
//     hook's `input` values: the job's input (the task's declared inputs);
//   - in an action's own fields (script, env, cmd, prompt, message...): the
//     step's input (its `input` map rendered, with the action's declared
//     defaults), or, for an inline step without an `input` map, the job's.

// refScope is what a template may read, for the checks.
type refScope struct {
	inputs    map[string]bool // declared input names; nil = not known statically
	inputsOf  string          // who declares them, for messages
	task      *workflow.Task  // nil: step references are not checked
	step      string          // the flow step the template belongs to
	upstream  map[string]bool // the steps whose outputs it sees
	forEach   bool            // `each` is set
	stepNames map[string]string
	actions   map[string]*workflow.Action
}

// checkRefs runs the checks over every template of the workspace.
func (l *loader) checkRefs() {
	open := l.openInputTasks()
	for _, name := range sortedKeys(l.ws.Tasks) {
		t := l.ws.Tasks[name]
		base := "tasks." + name
		jobInputs, inputsOf := declaredInputs(t.Input), fmt.Sprintf("task %q", name)
		if open[name] {
			jobInputs = nil // triggers add keys of their own (body, headers...)
		}
		names := stepVarNames(t)
		for _, sn := range t.FlowOrder {
			s := t.Flow[sn]
			sbase := base + ".flow." + sn
			up := upstreamSet(t, sn)
			jobScope := refScope{inputs: jobInputs, inputsOf: inputsOf, task: t, step: sn,
				upstream: up, forEach: s.ForEach != nil, stepNames: names, actions: l.ws.Actions}
			if up[sn] || !depsKnown(t, s) {
				// A cycle or an unknown dependency is reported already; what
				// is upstream is not known.
				jobScope.stepNames = nil
			}
			l.checkValueRefs(sbase+".input", s.Input, jobScope)
			l.checkTextRefs(sbase+".when", s.When, jobScope)
			if fe, ok := s.ForEach.(string); ok {
				feScope := jobScope
				feScope.forEach = false
				l.checkTextRefs(sbase+".for_each", fe, feScope)
			}
			if s.Inline == nil {
				continue
			}
			stepScope := jobScope
			if s.Input != nil {
				stepScope.inputs, stepScope.inputsOf = keySet(s.Input), fmt.Sprintf("step %q's input map", sn)
			}
			l.checkActionRefs(sbase, s.Inline, stepScope)
		}
		for i, h := range t.OnSuccess {
			l.checkValueRefs(fmt.Sprintf("%s.on_success[%d].input", base, i), h.Input, refScope{inputs: jobInputs, inputsOf: inputsOf})
		}
		for i, h := range t.OnError {
			l.checkValueRefs(fmt.Sprintf("%s.on_error[%d].input", base, i), h.Input, refScope{inputs: jobInputs, inputsOf: inputsOf})
		}
	}
	given := l.actionInputsGiven()
	for _, name := range sortedKeys(l.ws.Actions) {
		a := l.ws.Actions[name]
		inputs := declaredInputs(a.Input)
		if inputs == nil {
			inputs = map[string]bool{}
		}
		for k := range given[name] {
			inputs[k] = true
		}
		if given[name] == nil && a.Input == nil {
			inputs = nil // nothing says what it is given
		}
		l.checkActionRefs("actions."+name, a, refScope{inputs: inputs, inputsOf: fmt.Sprintf("action %q (nor given by a step or hook using it)", name)})
	}
}

// openInputTasks are the tasks that webhooks and event sources start: their
// jobs' input holds keys the task does not declare.
func (l *loader) openInputTasks() map[string]bool {
	open := map[string]bool{}
	for _, t := range l.ws.Triggers {
		switch t.Type {
		case workflow.TriggerWebhook:
			open[t.Task] = true
		case workflow.TriggerEventSource:
			open[t.Task] = true
			open[t.TargetTask] = true
		}
	}
	return open
}

// actionInputsGiven lists, per named action, the input keys the steps and
// hooks running it give; nil for an action nobody runs with an input map.
func (l *loader) actionInputsGiven() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	add := func(action string, in map[string]any) {
		if action == "" {
			return
		}
		if out[action] == nil {
			out[action] = map[string]bool{}
		}
		for k := range in {
			out[action][k] = true
		}
	}
	hooks := append(append([]*workflow.Hook(nil), l.ws.OnSuccess...), l.ws.OnError...)
	for _, t := range l.ws.Tasks {
		for _, s := range t.Flow {
			if s.Inline == nil {
				add(s.Action, s.Input)
			}
		}
		hooks = append(append(hooks, t.OnSuccess...), t.OnError...)
	}
	for _, h := range hooks {
		add(h.Action, h.Input)
	}
	return out
}

// checkActionRefs checks an action's own templated fields.
func (l *loader) checkActionRefs(base string, a *workflow.Action, sc refScope) {
	for _, f := range []struct {
		name, s string
	}{{"script", a.Script}, {"cmd", a.Cmd}, {"prompt", a.Prompt}, {"system_prompt", a.SystemPrompt}, {"message", a.Message}, {"workdir", a.Workdir}} {
		l.checkTextRefs(base+"."+f.name, f.s, sc)
	}
	for _, k := range sortedKeys(a.Env) {
		l.checkTextRefs(base+".env."+k, a.Env[k], sc)
	}
	for i, s := range a.Command {
		l.checkTextRefs(fmt.Sprintf("%s.command[%d]", base, i), s, sc)
	}
	for i, s := range a.Entrypoint {
		l.checkTextRefs(fmt.Sprintf("%s.entrypoint[%d]", base, i), s, sc)
	}
}

// checkValueRefs checks the templates in an input map, at any depth.
func (l *loader) checkValueRefs(path string, v any, sc refScope) {
	switch x := v.(type) {
	case string:
		l.checkTextRefs(path, x, sc)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			l.checkValueRefs(path+"."+k, x[k], sc)
		}
	case []any:
		for i, it := range x {
			l.checkValueRefs(fmt.Sprintf("%s[%d]", path, i), it, sc)
		}
	}
}

// checkTextRefs reports the references of one template that cannot work.
func (l *loader) checkTextRefs(path, src string, sc refScope) {
	refs, err := template.References(src)
	if err != nil {
		return // reported where the template was parsed
	}
	for _, r := range refs {
		msg := sc.problem(r.Path)
		if msg == "" {
			continue
		}
		if p, ok := l.refPos(path, src, r); ok {
			l.addErr(p, displayPath(path), msg)
		} else {
			l.errAt(path, msg)
		}
	}
}

// problem says what is wrong with a reference, or "".
func (sc refScope) problem(p []string) string {
	root := p[0]
	switch {
	case root == "input":
		if len(p) < 2 || sc.inputs == nil || sc.inputs[p[1]] {
			return ""
		}
		return fmt.Sprintf("input %q is not declared by %s%s", p[1], sc.inputsOf, declaredList(sc.inputs))
	case root == "each":
		if sc.task != nil && !sc.forEach {
			return fmt.Sprintf("%s: `each` is set only in a for_each step's templates", strings.Join(p, "."))
		}
		return ""
	case templateRoots[root] || sc.task == nil:
		return ""
	}
	step, ok := sc.stepNames[root]
	if !ok {
		return ""
	}
	ref := strings.Join(p, ".")
	switch {
	case step == sc.step:
		return fmt.Sprintf("%s: a step cannot read its own output", ref)
	case !sc.upstream[step]:
		return fmt.Sprintf("%s: step %q is not upstream of %q, so its output is never in scope: add it to depends_on", ref, step, sc.step)
	case len(p) >= 2 && p[1] != "output":
		return fmt.Sprintf("%s: a step offers only `output` to templates (%s.output...)", ref, root)
	case len(p) >= 3:
		fields := sc.outputFields(step)
		if fields != nil && !fields[p[2]] {
			return fmt.Sprintf("%s: step %q's output has no field %q%s", ref, step, p[2], declaredList(fields))
		}
	}
	return ""
}

// outputFields are the fields a step's output is known to have, or nil
// when that is not known statically.
func (sc refScope) outputFields(step string) map[string]bool {
	s := sc.task.Flow[step]
	if s == nil || s.ForEach != nil {
		return nil // an array of the instances' outputs
	}
	var a *workflow.Action
	if s.Inline != nil {
		a = s.Inline
	} else {
		a = sc.actions[s.Action]
	}
	if a == nil {
		return nil
	}
	switch {
	case a.Type == workflow.TypeApproval:
		return set("approved", "approved_by", "approved_at", "input")
	case a.Type == workflow.TypeAgent && len(a.Output) == 0:
		return set("text", "_meta")
	case len(a.Output) > 0:
		f := keySet(a.Output)
		if a.Type == workflow.TypeAgent {
			f["_meta"] = true
		}
		return f
	}
	return nil
}

// declaredInputs is the set of declared input names, nil without any.
func declaredInputs(in *workflow.Inputs) map[string]bool {
	if in == nil {
		return nil
	}
	return keySet(in.Fields)
}

func keySet[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func declaredList(m map[string]bool) string {
	if len(m) == 0 {
		return " (it declares none)"
	}
	names := keysOf(m)
	sort.Strings(names)
	return " (declared: " + strings.Join(names, ", ") + ")"
}

// stepVarNames maps the names templates use for the task's steps (hyphens
// as underscores too) to the steps.
func stepVarNames(t *workflow.Task) map[string]string {
	out := make(map[string]string, len(t.Flow))
	for sn := range t.Flow {
		out[sn] = sn
		out[strings.ReplaceAll(sn, "-", "_")] = sn
	}
	return out
}

// depsKnown reports whether every step s depends on is in t.
func depsKnown(t *workflow.Task, s *workflow.FlowStep) bool {
	for _, d := range s.DependsOn {
		if _, ok := t.Flow[d]; !ok {
			return false
		}
	}
	return true
}

// upstreamSet is a step's transitive dependencies.
func upstreamSet(t *workflow.Task, step string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		s, ok := t.Flow[n]
		if !ok {
			return
		}
		for _, d := range s.DependsOn {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(step)
	return seen
}

// refPos is where a reference sits in the file: inside a one-line scalar
// written without escapes, at the reference itself; else at the value.
func (l *loader) refPos(path, src string, r template.Ref) (pos, bool) {
	n, ok := l.nodes[path]
	if !ok || n.n == nil || r.Line != 1 || strings.Contains(src, "\n") {
		return pos{}, false
	}
	s, isStr := n.resolve().(*ast.StringNode)
	if !isStr || s != n.n {
		return pos{}, false // an alias or a tagged value: its text is elsewhere
	}
	tk := s.GetToken()
	if tk == nil || tk.Position == nil {
		return pos{}, false
	}
	raw := strings.TrimSpace(tk.Origin)
	shift := 0
	switch {
	case raw == src:
	case len(raw) == len(src)+2 && (raw[0] == '"' || raw[0] == '\'') && raw[1:len(raw)-1] == src:
		shift = 1
	default:
		return pos{}, false // escapes move the columns
	}
	p := n.pos()
	p.col += shift + r.Col - 1
	return p, true
}
