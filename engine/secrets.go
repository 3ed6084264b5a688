package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// minMaskedLen keeps very short values (a "1", a "yes") from being masked
// everywhere they appear in a log.
const minMaskedLen = 4

// MaskedMark replaces a secret value wherever a job's secrets are masked.
const MaskedMark = "***"

// SecretValues lists the values a job's log must not show (the interface:
// secret inputs are masked "in UI and logs"): the job's and its steps'
// inputs defined `secret: true`, secret properties of the connections they
// resolved to, and the workspace's secrets. Longest first, so a secret that
// contains another is masked whole.
func (e *Engine) SecretValues(ctx context.Context, jobID string) ([]string, error) {
	j, steps, err := e.Job(ctx, jobID)
	if err != nil {
		return nil, err
	}
	return e.SecretsOf(j, steps)
}

// SecretsOf is SecretValues for a job and steps already read (as Job
// returns them). ErrNotFound when the job's workspace is no longer loaded.
func (e *Engine) SecretsOf(j *Job, steps []*Step) ([]string, error) {
	ws, ok := e.cfg.Workspaces.Revision(j.Workspace, j.Revision)
	if !ok {
		if ws, ok = e.cfg.Workspaces.Current(j.Workspace); !ok {
			return nil, fmt.Errorf("workspace %q: %w", j.Workspace, ErrNotFound)
		}
	}
	task, ok := ws.Tasks[j.TaskName]
	if !ok && j.SourceType == SourceHook {
		task, _ = hookTask(ws, j.TaskName)
	}
	return jobSecrets(ws, task, j.Input, steps), nil
}

// secretValues is SecretValues on the loop's own copy of a job, which may
// be ahead of the store.
func (js *jobState) secretValues() []string {
	var steps []*Step
	js.each(func(ss *stepState) { steps = append(steps, ss.rec) })
	return jobSecrets(js.ws, js.task, js.job.Input, steps)
}

// mask replaces the job's secret values in s (a message about to be
// recorded or handed to a hook).
func (js *jobState) mask(s string) string {
	return Mask(s, js.secretValues())
}

// jobSecrets lists the secret values of a job of task (nil when the task is
// no longer defined: then only the workspace's secrets are known).
func jobSecrets(ws *workflow.Workspace, task *workflow.Task, input map[string]any, steps []*Step) []string {
	seen := map[string]bool{}
	add := func(v any) {
		if s, ok := v.(string); ok && len(s) >= minMaskedLen {
			seen[s] = true
		}
	}
	if task != nil {
		secretInputs(ws, task.Input, input, add)
		for _, s := range steps {
			if fs, ok := task.Flow[s.FlowStep]; ok {
				if a, ok := ws.StepAction(fs); ok {
					secretInputs(ws, a.Input, s.Input, add)
				}
			}
		}
	}
	for _, v := range ws.Secrets {
		add(v)
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(a, b int) bool {
		if len(out[a]) != len(out[b]) {
			return len(out[a]) > len(out[b])
		}
		return out[a] < out[b]
	})
	return out
}

// secretInputs passes add the values of the secret fields of input, and of
// the secret properties of connection-typed fields.
func secretInputs(ws *workflow.Workspace, defs *workflow.Inputs, input map[string]any, add func(any)) {
	if defs == nil {
		return
	}
	for name, def := range defs.Fields {
		v, ok := input[name]
		if !ok {
			continue
		}
		if def.Secret {
			add(v)
		}
		ct, ok := ws.ConnectionTypes[def.Type]
		conn, isMap := v.(map[string]any)
		if !ok || !isMap {
			continue
		}
		for prop, pdef := range ct.Properties {
			if pdef.Secret {
				add(conn[prop])
			}
		}
	}
}

// Mask replaces each of values (as SecretValues lists them: longest first)
// in s by ***. It is the one masking rule: for log lines, error messages,
// hook contexts and the job detail.
func Mask(s string, values []string) string {
	for _, v := range values {
		s = strings.ReplaceAll(s, v, MaskedMark)
	}
	return s
}

// MaskValue is Mask on every string inside v, a value decoded from JSON
// (maps and lists are copied, so v is left as it is).
func MaskValue(v any, values []string) any {
	if len(values) == 0 {
		return v
	}
	switch t := v.(type) {
	case string:
		return Mask(t, values)
	case map[string]any:
		return MaskMap(t, values)
	case []any:
		out := make([]any, len(t))
		for i, item := range t {
			out[i] = MaskValue(item, values)
		}
		return out
	}
	return v
}

// MaskMap is MaskValue on an object (nil stays nil).
func MaskMap(m map[string]any, values []string) map[string]any {
	if m == nil || len(values) == 0 {
		return m
	}
	out := make(map[string]any, len(m))
	for k, item := range m {
		out[k] = MaskValue(item, values)
	}
	return out
}
