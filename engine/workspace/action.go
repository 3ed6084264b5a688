package workspace

import (
	"path"
	"slices"
	"strings"

	"github.com/appliance-sh/appliance/engine/template/quote"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// commonActionKeys are allowed on every action type.
var commonActionKeys = union(set("type", "name", "description", "input", "output", "env", "tags", "workdir", "resources"), retryKeys)

// typeActionKeys are the fields each action type adds to the common ones.
var typeActionKeys = map[string]map[string]bool{
	workflow.TypeScript:   set("script", "source", "runner", "language", "dependencies", "interpreter", "manifest"),
	workflow.TypeDocker:   set("image", "cmd", "entrypoint", "command"),
	workflow.TypePod:      set("image", "cmd", "entrypoint", "command", "manifest"),
	workflow.TypeTask:     set("task"),
	workflow.TypeAgent:    set("provider", "prompt", "system_prompt", "model", "max_tokens", "temperature"),
	workflow.TypeApproval: set("message"),
}

// runners are the values of a script action's runner field.
var runners = set("local", "docker", "pod")

// workerOnlyKeys make sense only where a worker runs the step; the
// server-side types (task, agent, approval) forbid them.
var workerOnlyKeys = set("env", "tags", "workdir", "resources")

// noRetryTypes are the action types whose steps never retry: an approval
// is answered once, a task step's child job is a job of its own, and an
// agent's provider client already retries transient errors (its
// max_retries) inside the one call the step makes.
var noRetryTypes = set(workflow.TypeTask, workflow.TypeApproval, workflow.TypeAgent)

var allActionKeys = union(commonActionKeys, typeActionKeys[workflow.TypeScript], typeActionKeys[workflow.TypeDocker],
	typeActionKeys[workflow.TypePod], typeActionKeys[workflow.TypeTask], typeActionKeys[workflow.TypeAgent], typeActionKeys[workflow.TypeApproval])

// action reads an action from o. For an inline action o also holds the
// step's own keys, which are skipped here; name, description and input
// then belong to the step.
func (l *loader) action(o obj, inline bool) *workflow.Action {
	a := &workflow.Action{}
	if o.has("type") {
		a.Type = o.str("type")
	} else if inline && (o.has("script") || o.has("source")) {
		a.Type = workflow.TypeScript
	} else {
		o.headErrorf("missing required field %q", "type")
		return nil
	}
	if _, ok := typeActionKeys[a.Type]; !ok {
		if tn, ok := o.get("type"); ok && a.Type != "" {
			tn.errorf("unknown action type %q%s", a.Type, suggest(a.Type, keysOfMap(typeActionKeys)))
		}
		return nil
	}
	allowed := union(commonActionKeys, typeActionKeys[a.Type])
	for _, k := range o.keys {
		if !allActionKeys[k] || (inline && stepKeys[k]) {
			continue
		}
		if !allowed[k] || (workflow.ServerSide(a.Type) && workerOnlyKeys[k]) || (noRetryTypes[a.Type] && retryKeys[k]) {
			o.m[k].k.errorf("not allowed for %s actions", a.Type)
			delete(o.m, k)
		}
	}
	if !inline {
		a.RetrySpec = retrySpec(o)
		a.Name = o.str("name")
		a.Description = o.str("description")
		if v, ok := o.get("input"); ok {
			a.Input = l.inputs(v)
		}
	}
	if v, ok := o.get("output"); ok {
		a.Output = l.outputs(v)
	}
	if v, ok := o.get("env"); ok {
		a.Env = l.templateMap(v)
	}
	if v, ok := o.get("tags"); ok {
		a.Tags = v.strList()
	}
	a.Workdir = o.str("workdir")
	if v, ok := o.get("resources"); ok {
		if r, ok := v.object(set("cpu", "memory")); ok {
			a.Resources = &workflow.Resources{CPU: r.text("cpu"), Memory: r.text("memory")}
		}
	}
	switch a.Type {
	case workflow.TypeScript:
		l.scriptAction(o, a)
	case workflow.TypeDocker, workflow.TypePod:
		o.require("image")
		a.Image = o.str("image")
		a.Cmd = o.str("cmd")
		if v, ok := o.get("cmd"); ok {
			l.parseTemplate(v, a.Cmd)
			// The runner runs cmd with `sh -c`: it is a shell script.
			l.checkScript(v, a.Cmd, quote.Shell, node{}, "")
			l.warnRawData(v, a.Cmd)
		}
		if v, ok := o.get("entrypoint"); ok {
			a.Entrypoint = v.strList()
		}
		if v, ok := o.get("command"); ok {
			a.Command = v.strList()
		}
		l.checkArgvScript(o, a)
		if a.Type == workflow.TypePod {
			a.Manifest = manifest(o)
		}
	case workflow.TypeTask:
		o.require("task")
		a.Task = o.str("task")
	case workflow.TypeAgent:
		l.agentAction(o, a)
	case workflow.TypeApproval:
		if v, ok := o.get("message"); ok {
			a.Message, _ = v.text()
			l.parseTemplate(v, a.Message)
		}
	}
	return a
}

func (l *loader) scriptAction(o obj, a *workflow.Action) {
	switch {
	case o.has("script") && o.has("source"):
		o.m["source"].k.errorf("script and source are mutually exclusive: keep one")
	case !o.has("script") && !o.has("source"):
		o.headErrorf("missing required field: one of %q or %q", "script", "source")
	}
	if v, ok := o.get("script"); ok {
		a.Script, _ = v.str()
		l.parseTemplate(v, a.Script)
	}
	if v, ok := o.get("source"); ok {
		if s, ok := v.str(); ok {
			a.Source = l.sourcePath(v, s)
		}
	}
	a.Runner = "local"
	if v, ok := o.get("runner"); ok {
		if r, _ := v.str(); runners[r] {
			a.Runner = r
		} else if r != "" {
			v.errorf("unknown runner %q%s", r, suggest(r, keysOf(runners)))
		}
	}
	a.Language = "shell"
	if v, ok := o.get("language"); ok {
		lang, _ := v.str()
		if norm, ok := workflow.NormalLanguage(lang); ok {
			a.Language = norm
		} else {
			v.errorf("unknown language %q%s", lang, suggest(lang, append(workflow.Languages(), workflow.LanguageAliases()...)))
		}
	}
	if v, ok := o.get("dependencies"); ok {
		a.Dependencies = v.strList()
		if a.Language == "shell" && len(a.Dependencies) > 0 {
			o.m["dependencies"].k.errorf("needs a language other than shell (python, javascript, typescript or go)")
		}
	}
	a.Interpreter = o.str("interpreter")
	if v, ok := o.get("script"); ok {
		interp, _ := o.get("interpreter")
		l.checkScript(v, a.Script, quote.Lang(a.Language), interp, a.Interpreter)
		l.warnRawData(v, a.Script)
	}
	if o.has("manifest") {
		if a.Runner != "pod" {
			o.m["manifest"].k.errorf("only allowed with runner: pod")
		} else {
			a.Manifest = manifest(o)
		}
	}
}

// sourcePath checks a script source: relative, inside the workspace, and a
// file the workspace ships.
func (l *loader) sourcePath(n node, s string) string {
	p := path.Clean(strings.ReplaceAll(s, "\\", "/"))
	switch {
	case s == "":
		n.errorf("empty source path")
		return ""
	case path.IsAbs(s) || p == ".." || strings.HasPrefix(p, "../"):
		n.errorf("source %q is outside the workspace: give a path relative to the workspace root", s)
		return ""
	case !l.shipped[p]:
		n.errorf("source file %q not found in the workspace", s)
		return ""
	}
	return p
}

func manifest(o obj) map[string]any {
	v, ok := o.get("manifest")
	if !ok {
		return nil
	}
	raw := v.value()
	m, isMap := raw.(map[string]any)
	if !isMap && raw != nil {
		v.errorf("expected a mapping (pod spec overrides)")
	}
	return m
}

func (l *loader) agentAction(o obj, a *workflow.Action) {
	o.require("provider", "prompt")
	a.Provider = o.str("provider")
	if v, ok := o.get("provider"); ok && l.opts.Providers != nil && a.Provider != "" && !slices.Contains(l.opts.Providers, a.Provider) {
		known := "none"
		if len(l.opts.Providers) > 0 {
			known = strings.Join(l.opts.Providers, ", ")
		}
		v.errorf("unknown agent provider %q (the server config's agents.providers defines: %s)", a.Provider, known)
	}
	a.Model = o.str("model")
	if v, ok := o.get("prompt"); ok {
		a.Prompt, _ = v.str()
		l.parseTemplate(v, a.Prompt)
	}
	if v, ok := o.get("system_prompt"); ok {
		a.SystemPrompt, _ = v.str()
		l.parseTemplate(v, a.SystemPrompt)
	}
	if v, ok := o.get("max_tokens"); ok {
		if n, ok := v.integer(); ok {
			if n < 1 {
				v.errorf("must be at least 1")
			} else {
				a.MaxTokens = &n
			}
		}
	}
	if v, ok := o.get("temperature"); ok {
		if t, ok := v.number(); ok {
			if t < 0 || t > 2 {
				v.errorf("must be between 0 and 2, got %v", t)
			} else {
				a.Temperature = &t
			}
		}
	}
}
