package engine

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/appliance-sh/appliance/engine/template"
)

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

// outputNames maps each name a template may use for an upstream step in
// scope (its name, and with - as _) to the step's name.
func outputNames(js *jobState, ss *stepState) map[string]string {
	names := map[string]string{}
	for _, name := range js.upstreamOf(ss.rec.FlowStep) {
		if up, ok := js.steps[name]; ok && up.rec.Status == StepCompleted {
			names[name] = name
			names[strings.ReplaceAll(name, "-", "_")] = name
		}
	}
	return names
}

// outputRef is a read of a field of a step's output, as gonja names it.
var outputRef = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*)\.output(?:\.([A-Za-z_][A-Za-z0-9_]*)|\[['"]([^'"]*)['"]\])`)

// explainOutputRead rewords a render that failed reading an upstream
// step's output field: the step printed no output, or its output lacks
// the field (the fields it has are named; their values never are, as they
// may be secrets). Any other error comes back as it was.
func explainOutputRead(err error, names map[string]string, scope map[string]any) error {
	var ref *template.RefError
	if err == nil || !errors.As(err, &ref) {
		return err
	}
	m := outputRef.FindStringSubmatch(ref.Expr)
	if m == nil {
		return err
	}
	step, ok := names[m[1]]
	v, _ := scope[m[1]].(map[string]any)
	if !ok || v == nil {
		return err
	}
	field := m[2] + m[3]
	var why string
	switch out := v["output"].(type) {
	case nil:
		why = fmt.Sprintf("step %q has no output (no line \"OUTPUT: {json object}\" in its log)", step)
	case map[string]any:
		if out == nil {
			why = fmt.Sprintf("step %q has no output (no line \"OUTPUT: {json object}\" in its log)", step)
			break
		}
		if _, has := out[field]; has {
			return err
		}
		has := "it has no fields"
		if len(out) > 0 {
			has = "it has: " + strings.Join(slices.Sorted(maps.Keys(out)), ", ")
		}
		why = fmt.Sprintf("step %q's output has no field %s; %s", step, field, has)
	default:
		return err
	}
	msg := err.Error()
	if at := ref.Error(); strings.Contains(msg, at) {
		msg = strings.Replace(msg, at, why, 1)
	} else {
		msg += " (" + why + ")"
	}
	return &explainedError{msg: msg, err: err}
}

// explainedError reads as its explanation and wraps the render's error.
type explainedError struct {
	msg string
	err error
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }
