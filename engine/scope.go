package engine

import "strings"

// jobScope is the variables a flow step's `when`, `for_each` and `input`
// render with: the job's input, upstream outputs, secrets and `each`.
func (e *Engine) jobScope(js *jobState, ss *stepState) map[string]any {
	return e.scope(js, ss, js.job.Input)
}

// stepScope is the variables an action's own fields render with: as the
// job scope, but `input` is the step's resolved input.
func (e *Engine) stepScope(js *jobState, ss *stepState) map[string]any {
	return e.scope(js, ss, ss.rec.Input)
}

func (e *Engine) scope(js *jobState, ss *stepState, input map[string]any) map[string]any {
	vars := map[string]any{}
	for _, name := range js.upstreamOf(ss.rec.FlowStep) {
		up, ok := js.steps[name]
		if !ok || up.rec.Status != StepCompleted {
			continue
		}
		v := map[string]any{"output": up.rec.Output}
		vars[name] = v
		if strings.Contains(name, "-") {
			vars[strings.ReplaceAll(name, "-", "_")] = v
		}
	}
	secrets := make(map[string]any, len(js.ws.Secrets))
	for k, v := range js.ws.Secrets {
		secrets[k] = v
	}
	// Reserved names win over step names.
	vars["input"] = input
	vars["secret"] = secrets
	vars["secrets"] = secrets
	if ss.isInstance() || ss.rec.Index >= 0 {
		vars["each"] = map[string]any{"item": ss.rec.Item, "index": ss.rec.Index}
	}
	return vars
}

// upstreamOf lists a flow step's transitive dependencies, computed once per
// job: only their outputs are in scope, so a template never sees a step
// that may or may not have finished.
func (js *jobState) upstreamOf(name string) []string {
	if up, ok := js.upstream[name]; ok {
		return up
	}
	seen := map[string]bool{}
	var up []string
	var walk func(n string)
	walk = func(n string) {
		fs, ok := js.task.Flow[n]
		if !ok {
			return
		}
		for _, d := range fs.DependsOn {
			if !seen[d] {
				seen[d] = true
				up = append(up, d)
				walk(d)
			}
		}
	}
	walk(name)
	js.upstream[name] = up
	return up
}
