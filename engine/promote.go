package engine

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// maxForEach is the interface's limit on for_each items.
const maxForEach = 10000

// evaluate decides a pending flow step whose dependencies are all terminal:
// skipped, failed, expanded into for_each instances, or ready.
func (e *Engine) evaluate(b *batch, js *jobState, ss *stepState) {
	if !depsSatisfied(ss) {
		e.skip(b, js, ss)
		return
	}
	scope := e.jobScope(js, ss)
	if ss.flow.When != "" {
		v, err := js.ws.Templates.Eval(ss.flow.When, scope)
		if err != nil {
			e.fail(b, js, ss, "when: "+err.Error())
			return
		}
		if !template.Truthy(v) {
			e.skip(b, js, ss)
			return
		}
	}
	if ss.flow.ForEach != nil {
		e.expand(b, js, ss, scope)
		return
	}
	e.prepare(b, js, ss)
}

// depsSatisfied applies the promotion rule: completed and skipped
// dependencies satisfy a step, failed and cancelled ones only with
// continue_on_failure, and a step whose dependencies were all skipped is
// skipped too.
func depsSatisfied(ss *stepState) bool {
	if len(ss.deps) == 0 {
		return true
	}
	allSkipped := true
	for _, d := range ss.deps {
		switch d.rec.Status {
		case StepSkipped:
		case StepCompleted:
			allSkipped = false
		default:
			if !ss.flow.ContinueOnFailure {
				return false
			}
			allSkipped = false
		}
	}
	return !allSkipped
}

// expand creates a for_each step's instances; the parent record runs until
// they are all terminal.
func (e *Engine) expand(b *batch, js *jobState, p *stepState, scope map[string]any) {
	items, err := forEachItems(js.ws, p.flow.ForEach, scope)
	if err != nil {
		e.fail(b, js, p, "for_each: "+err.Error())
		return
	}
	if len(items) > maxForEach {
		e.fail(b, js, p, fmt.Sprintf("for_each: %d items exceed the limit of %d", len(items), maxForEach))
		return
	}
	if len(items) == 0 {
		p.rec.Output = []any{}
		e.finishStep(b, p, StepCompleted, nil)
		e.stepDone(b, js, p)
		return
	}
	now := b.now
	p.rec.Status = StepRunning
	p.rec.StartedAt = &now
	b.dirtyStep(p.rec)
	for i, item := range items {
		in := &stepState{
			rec: &Step{
				JobID:        p.rec.JobID,
				Name:         fmt.Sprintf("%s[%d]", p.rec.Name, i),
				FlowStep:     p.rec.Name,
				Index:        i,
				Item:         item,
				Seq:          p.rec.Seq + 1 + i,
				ActionName:   p.rec.ActionName,
				ActionType:   p.rec.ActionType,
				Runner:       p.rec.Runner,
				Status:       StepPending,
				RequiredTags: p.rec.RequiredTags,
			},
			flow:   p.flow,
			action: p.action,
			parent: p,
		}
		p.instances = append(p.instances, in)
		js.add(in)
		b.dirtyStep(in.rec)
	}
	if p.flow.Sequential {
		e.prepare(b, js, p.instances[0])
		return
	}
	for _, in := range p.instances {
		if in.rec.Status == StepPending {
			e.prepare(b, js, in)
		}
	}
}

// prepare resolves a step's input and makes it ready for a worker, or
// dispatches it on the server.
func (e *Engine) prepare(b *batch, js *jobState, ss *stepState) {
	switch ss.action.Type {
	case workflow.TypeAgent:
		e.fail(b, js, ss, fmt.Sprintf("action type %q is not supported yet", ss.action.Type))
		return
	case workflow.TypeApproval:
		e.awaitApproval(b, js, ss)
		return
	}
	input, err := e.resolveInput(js, ss)
	if err != nil {
		e.fail(b, js, ss, "input: "+err.Error())
		return
	}
	if ss.action.Type == workflow.TypeTask {
		e.startChild(b, js, ss, input)
		return
	}
	now := b.now
	ss.rec.Input = input
	ss.rec.Status = StepReady
	ss.rec.ReadyAt = &now
	b.dirtyStep(ss.rec)
	e.offer(b, js, ss)
}

// startOnServer starts a step the server runs itself (a task step's child
// job, an approval): it holds no worker, and its job is running from now.
func (e *Engine) startOnServer(b *batch, js *jobState, ss *stepState, status string) {
	now := b.now
	ss.rec.Status = status
	ss.rec.StartedAt = &now
	b.dirtyStep(ss.rec)
	e.markJobStarted(b, js)
}

// resolveInput renders the flow step's input map in the job's scope, then
// applies the action's input definitions.
func (e *Engine) resolveInput(js *jobState, ss *stepState) (map[string]any, error) {
	given, err := e.givenInput(js, ss)
	if err != nil || ss.action.Input == nil || len(ss.action.Input.Fields) == 0 {
		return given, err
	}
	return js.ws.ResolveInput(ss.action.Input, given)
}

// givenInput is the flow step's input map rendered in the job's scope.
func (e *Engine) givenInput(js *jobState, ss *stepState) (map[string]any, error) {
	var given map[string]any
	switch {
	case ss.flow.Input != nil:
		v, err := js.ws.Templates.EvalValue(ss.flow.Input, e.jobScope(js, ss))
		if err != nil {
			return nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rendered to %T, not an object", v)
		}
		given = m
	case ss.flow.Action == "":
		// An inline step without an input map takes the job's input.
		given = make(map[string]any, len(js.job.Input))
		for k, v := range js.job.Input {
			given[k] = v
		}
	default:
		given = map[string]any{}
	}
	return given, nil
}

// stepDone moves the DAG on after a step became terminal.
func (e *Engine) stepDone(b *batch, js *jobState, ss *stepState) {
	if ss.isInstance() {
		e.instanceDone(b, js, ss)
		return
	}
	for _, d := range ss.dependents {
		if d.rec.Status == StepPending && d.allDepsTerminal() {
			e.evaluate(b, js, d)
		}
	}
	e.checkJobDone(b, js)
}

// instanceDone starts the next sequential instance, and ends the parent
// once every instance is terminal, aggregating their outputs in order.
func (e *Engine) instanceDone(b *batch, js *jobState, in *stepState) {
	p := in.parent
	if p.flow.Sequential {
		if next := in.rec.Index + 1; next < len(p.instances) && p.instances[next].rec.Status == StepPending {
			e.prepare(b, js, p.instances[next])
			return
		}
	}
	out := make([]any, len(p.instances))
	failed := 0
	for i, x := range p.instances {
		if !x.terminal() {
			return
		}
		switch x.rec.Status {
		case StepCompleted:
			out[i] = x.rec.Output
		case StepFailed:
			failed++
		}
	}
	p.rec.Output = out
	if failed > 0 {
		msg := fmt.Sprintf("%d of %d for_each instances failed", failed, len(p.instances))
		e.finishStep(b, p, StepFailed, &msg)
	} else {
		e.finishStep(b, p, StepCompleted, nil)
	}
	e.stepDone(b, js, p)
}

func (e *Engine) skip(b *batch, js *jobState, ss *stepState) {
	e.finishStep(b, ss, StepSkipped, nil)
	e.stepDone(b, js, ss)
}

// fail ends a step the server itself could not run (a `when`, for_each,
// input or template error, an unsupported type) and says so in the job's
// `_server` log, since no worker wrote anything about it.
func (e *Engine) fail(b *batch, js *jobState, ss *stepState, msg string) {
	msg = js.mask(msg) // an error may quote a rendered value
	b.serverLog(js.job.ID, fmt.Sprintf("step %q failed: %s", ss.rec.Name, msg))
	e.finishStep(b, ss, StepFailed, &msg)
	e.stepDone(b, js, ss)
}

// finishStep records a terminal status; it does not move the DAG on.
func (e *Engine) finishStep(b *batch, ss *stepState, status string, errMsg *string) {
	now := b.now
	ss.rec.Status = status
	ss.rec.CompletedAt = &now
	ss.rec.ErrorMessage = errMsg
	stopTimer(&ss.timer)
	b.dirtyStep(ss.rec)
	b.ended = append(b.ended, ss.rec)
}

// forEachItems turns a for_each value into its items: a literal list, or a
// template yielding a list (a JSON string of a list is accepted too).
func forEachItems(ws *workflow.Workspace, v any, scope map[string]any) ([]any, error) {
	if s, ok := v.(string); ok {
		r, err := ws.Templates.Eval(s, scope)
		if err != nil {
			return nil, err
		}
		v = r
	}
	switch x := v.(type) {
	case []any:
		return x, nil
	case nil:
		return nil, fmt.Errorf("yielded null, not a list")
	case string:
		var items []any
		if err := json.Unmarshal([]byte(strings.TrimSpace(x)), &items); err != nil || items == nil {
			return nil, fmt.Errorf("%q is not a list", truncate(x, 80))
		}
		return items, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, fmt.Errorf("yielded %T, not a list", v)
	}
	items := make([]any, rv.Len())
	for i := range items {
		items[i] = rv.Index(i).Interface()
	}
	return items, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
