package engine

import (
	"context"
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
// skipped, failed, expanded into for_each instances, or ready. Deciding may
// render templates (`when`, a `for_each` expression, the input): those
// renders run in the pool, never here, and the step stays pending until
// their result comes back (renderOff); a step without templates is
// decided at once.
func (e *Engine) evaluate(b *batch, js *jobState, ss *stepState) {
	if ss.rendering {
		return
	}
	if !depsSatisfied(ss) {
		e.skip(b, js, ss)
		return
	}
	fs := ss.flow
	forEachTemplate := false
	if s, ok := fs.ForEach.(string); ok {
		forEachTemplate = template.IsTemplate(s)
	}
	renders := template.IsTemplate(fs.When) || forEachTemplate || fs.ForEach == nil && e.prepRenders(js, ss)
	if !renders {
		e.evalWork(js, ss, nil)(context.Background())(b)
		return
	}
	e.renderOff(js, ss, "", e.evalWork(js, ss, e.jobScope(js, ss)))
}

// evalWork is evaluate's decision as a function of its own, safe off the
// loop: scope is a snapshot of the job scope (nil when nothing renders).
func (e *Engine) evalWork(js *jobState, ss *stepState, scope map[string]any) func(ctx context.Context) func(*batch) {
	ws, fs := js.ws, ss.flow
	names := outputNames(js, ss)
	var prep func(ctx context.Context) func(*batch)
	if fs.ForEach == nil {
		prep = e.prepWork(js, ss, scope)
	}
	return func(ctx context.Context) func(*batch) {
		if fs.When != "" {
			v, err := ws.Templates.EvalContext(ctx, fs.When, scope)
			if err != nil {
				return e.failWith(js, ss, "when: "+explainOutputRead(err, names, scope).Error())
			}
			if !template.Truthy(v) {
				return func(b *batch) { e.skip(b, js, ss) }
			}
		}
		if fs.ForEach != nil {
			items, err := forEachItems(ctx, ws, fs.ForEach, scope)
			return func(b *batch) { e.expand(b, js, ss, items, err) }
		}
		return prep(ctx)
	}
}

func (e *Engine) failWith(js *jobState, ss *stepState, msg string) func(*batch) {
	return func(b *batch) { e.fail(b, js, ss, msg) }
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
func (e *Engine) expand(b *batch, js *jobState, p *stepState, items []any, err error) {
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
		in := &stepState{rec: instanceRecord(p.rec, i, item), flow: p.flow, action: p.action, parent: p}
		if o := js.reusedInstance(p.rec.Name, i, item); o != nil {
			reuseRecord(in.rec, o, js.job.RerunOf)
			js.noteInput(in)
		}
		p.instances = append(p.instances, in)
		js.add(in)
		b.dirtyStep(in.rec)
	}
	delete(js.reuse, p.rec.Name)
	pending := false
	for _, in := range p.instances {
		if in.rec.Status == StepPending {
			pending = true
			e.prepare(b, js, in)
			if p.flow.Sequential {
				return
			}
		}
	}
	if !pending {
		// A re-run reused every instance.
		e.instanceDone(b, js, p.instances[len(p.instances)-1])
	}
}

// instanceRecord is the pending record of a for_each step's instance i.
func instanceRecord(p *Step, i int, item any) *Step {
	return &Step{
		JobID:        p.JobID,
		Name:         fmt.Sprintf("%s[%d]", p.Name, i),
		FlowStep:     p.Name,
		Index:        i,
		Item:         item,
		Seq:          p.Seq + 1 + i,
		ActionName:   p.ActionName,
		ActionType:   p.ActionType,
		Runner:       p.Runner,
		Status:       StepPending,
		RequiredTags: p.RequiredTags,
	}
}

// prepare resolves a step's input and makes it ready for a worker, or
// dispatches it on the server. Templates render in the pool (renderOff).
func (e *Engine) prepare(b *batch, js *jobState, ss *stepState) {
	if ss.rendering {
		return
	}
	if !e.prepRenders(js, ss) {
		e.prepWork(js, ss, nil)(context.Background())(b)
		return
	}
	e.renderOff(js, ss, "input: ", e.prepWork(js, ss, e.jobScope(js, ss)))
}

// prepRenders reports whether preparing the step renders a template: its
// input map, a templated input default, an approval's message, or a child
// job's input defaults.
func (e *Engine) prepRenders(js *jobState, ss *stepState) bool {
	a := ss.action
	switch {
	case template.HasTemplate(ss.flow.Input), workflow.RendersDefaults(a.Input):
		return true
	case a.Type == workflow.TypeApproval:
		return template.IsTemplate(a.Message)
	case a.Type == workflow.TypeAgent:
		return true // its prompts render in the step's scope
	case a.Type == workflow.TypeTask:
		t, ok := js.ws.Tasks[a.Task]
		return ok && workflow.RendersDefaults(t.Input)
	}
	return false
}

// prepWork is prepare's work as a function safe off the loop: scope is a
// snapshot of the job scope (nil when nothing renders). It returns what
// the loop then does.
func (e *Engine) prepWork(js *jobState, ss *stepState, scope map[string]any) func(ctx context.Context) func(*batch) {
	ws, fs, a := js.ws, ss.flow, ss.action
	jobInput, depth, parentID, workspace := js.job.Input, js.job.Depth, js.job.ID, js.job.Workspace
	names := outputNames(js, ss)
	return func(ctx context.Context) func(*batch) {
		given, err := givenInput(ctx, ws, fs, scope, jobInput)
		if err != nil {
			return e.failWith(js, ss, "input: "+explainOutputRead(err, names, scope).Error())
		}
		if a.Type == workflow.TypeApproval {
			msg, err := ws.Templates.RenderContext(ctx, a.Message, withInput(scope, given))
			if err != nil {
				return e.failWith(js, ss, "message: "+explainOutputRead(err, names, withInput(scope, given)).Error())
			}
			return func(b *batch) { e.awaitApproval(b, js, ss, given, msg) }
		}
		input := given
		if a.Input != nil && len(a.Input.Fields) > 0 {
			if input, err = ws.ResolveInputContext(ctx, a.Input, given); err != nil {
				return e.failWith(js, ss, "input: "+err.Error())
			}
		}
		if a.Type == workflow.TypeAgent {
			req, system, err := agentRequest(ctx, ws, a, withInput(scope, input))
			if err != nil {
				return e.failWith(js, ss, err.Error())
			}
			return func(b *batch) { e.startAgent(b, js, ss, input, req, system) }
		}
		if a.Type != workflow.TypeTask {
			return func(b *batch) { e.makeReady(b, js, ss, input) }
		}
		if depth >= maxChildDepth {
			return e.failWith(js, ss, fmt.Sprintf("child jobs nest at most %d levels", maxChildDepth))
		}
		child, err := e.buildJobIn(ctx, ws, CreateJob{
			Workspace:  workspace,
			Task:       a.Task,
			Input:      input,
			SourceType: SourceTask,
			SourceID:   &parentID,
		})
		if err != nil {
			return e.failWith(js, ss, "child job: "+err.Error())
		}
		return func(b *batch) { e.startChild(b, js, ss, input, child) }
	}
}

// makeReady files a prepared step for the workers.
func (e *Engine) makeReady(b *batch, js *jobState, ss *stepState, input map[string]any) {
	now := b.now
	ss.rec.Input = input
	js.noteInput(ss)
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

// givenInput is the flow step's input map rendered in the job's scope.
func givenInput(ctx context.Context, ws *workflow.Workspace, fs *workflow.FlowStep, scope, jobInput map[string]any) (map[string]any, error) {
	switch {
	case fs.Input != nil:
		v, err := ws.Templates.EvalValueContext(ctx, fs.Input, scope)
		if err != nil {
			return nil, err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rendered to %T, not an object", v)
		}
		return m, nil
	case fs.Action == "":
		// An inline step without an input map takes the job's input.
		given := make(map[string]any, len(jobInput))
		for k, v := range jobInput {
			given[k] = v
		}
		return given, nil
	}
	return map[string]any{}, nil
}

// withInput is a scope with `input` replaced: the step scope an action's
// own fields render in.
func withInput(scope, input map[string]any) map[string]any {
	out := make(map[string]any, len(scope)+1)
	for k, v := range scope {
		out[k] = v
	}
	out["input"] = input
	return out
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
// once every instance is terminal, aggregating their outputs in order. It
// costs O(1) amortized per instance (see stepState.settled).
func (e *Engine) instanceDone(b *batch, js *jobState, in *stepState) {
	p := in.parent
	if p.flow.Sequential {
		// The next instance to run; a re-run's reused ones are passed over.
		for _, next := range p.instances[in.rec.Index+1:] {
			if next.rec.Status == StepPending {
				e.prepare(b, js, next)
				return
			}
			if !next.terminal() {
				break
			}
		}
	}
	// Instances before p.settled are terminal: the scan resumes there, so
	// all the instances of a step cost O(n) together, not O(n) each.
	for p.settled < len(p.instances) && p.instances[p.settled].terminal() {
		p.settled++
	}
	if p.settled < len(p.instances) || p.terminal() {
		return
	}
	// The last instance ended: the aggregate is assembled once, in index
	// order, null for a failed or skipped instance.
	out := make([]any, len(p.instances))
	failed := 0
	for i, x := range p.instances {
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
	ss.rec.RetryAt = nil
	stopTimer(&ss.timer)
	ss.abortAgent()
	b.dirtyStep(ss.rec)
	b.ended = append(b.ended, ss.rec)
}

// forEachItems turns a for_each value into its items: a literal list, or a
// template yielding a list (a JSON string of a list is accepted too).
func forEachItems(ctx context.Context, ws *workflow.Workspace, v any, scope map[string]any) ([]any, error) {
	if s, ok := v.(string); ok {
		r, err := ws.Templates.EvalContext(ctx, s, scope)
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
