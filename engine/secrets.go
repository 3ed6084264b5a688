package engine

import (
	"context"
	"fmt"
	"sort"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// minMaskedLen keeps very short values (a "1", a "yes") from being masked
// everywhere they appear in a log.
const minMaskedLen = 4

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
	ws, ok := e.cfg.Workspaces.Revision(j.Workspace, j.Revision)
	if !ok {
		if ws, ok = e.cfg.Workspaces.Current(j.Workspace); !ok {
			return nil, fmt.Errorf("workspace %q: %w", j.Workspace, ErrNotFound)
		}
	}
	seen := map[string]bool{}
	add := func(v any) {
		if s, ok := v.(string); ok && len(s) >= minMaskedLen {
			seen[s] = true
		}
	}
	if task, ok := ws.Tasks[j.TaskName]; ok {
		secretInputs(ws, task.Input, j.Input, add)
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
	return out, nil
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
