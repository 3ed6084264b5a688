package engine

import (
	"context"
	"fmt"
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
// contains another is masked whole. A live job's come from memory; an
// ended job's are computed again from the store.
func (e *Engine) SecretValues(ctx context.Context, jobID string) ([]string, error) {
	if s, ok := e.secrets.get(jobID); ok {
		return s.values(), nil
	}
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

// secretSet is the job's secret values, gathered from the loop's copy of
// the job (which may be ahead of the store) the first time they are asked
// for; the loop adds each step's as its input is resolved (noteInput).
func (js *jobState) secretSet() *secretSet {
	js.secretsOnce.Do(func() {
		s := newSecretSet()
		s.addJob(js.ws, js.task, js.job.Input)
		js.each(func(ss *stepState) {
			if ss.rec.Input != nil {
				s.addRecord(js.ws, ss.action, ss.rec)
			}
		})
		js.secrets = s
	})
	return js.secrets
}

// noteInput records the secrets of a step's input, just resolved.
func (js *jobState) noteInput(ss *stepState) {
	js.secretSet().addStep(js.ws, ss.action, ss.rec.Input)
}

// secretValues is SecretValues of a live job, without reading the store.
func (js *jobState) secretValues() []string { return js.secretSet().values() }

// mask replaces the job's secret values in s (a message about to be
// recorded or handed to a hook).
func (js *jobState) mask(s string) string {
	return Mask(s, js.secretValues())
}

// jobSecrets lists the secret values of a job of task, read from the store
// (nil task when no longer defined: then only the workspace's secrets are
// known).
func jobSecrets(ws *workflow.Workspace, task *workflow.Task, input map[string]any, steps []*Step) []string {
	s := newSecretSet()
	s.addJob(ws, task, input)
	if task != nil {
		for _, st := range steps {
			if fs, ok := task.Flow[st.FlowStep]; ok {
				if a, ok := ws.StepAction(fs); ok {
					s.addRecord(ws, a, st)
				}
			}
		}
	}
	return s.values()
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

// approverInput is the input an approver gave an approval step (kept in its
// output), nil for other steps.
func approverInput(a *workflow.Action, st *Step) map[string]any {
	out, ok := st.Output.(map[string]any)
	if a.Type != workflow.TypeApproval || !ok {
		return nil
	}
	in, _ := out["input"].(map[string]any)
	return in
}

// AppendLog writes lines to the job's log with the job's secret values
// masked: the one way into the log sink, for the engine's own lines and for
// the lines workers push. A live job's secrets are in memory, so a push
// costs no store read.
func (e *Engine) AppendLog(jobID string, lines []LogLine) error {
	if e.cfg.Logs == nil {
		return nil
	}
	return e.appendPushed(jobID, lines, e.cfg.Logs.Append)
}

// AppendRunLog is AppendLog for the lines one run of a step pushed,
// numbered by LogLine.Seq: a sink that keeps the numbers (RunLogSink)
// appends only the lines it lacks, so a repeated push writes no line
// twice. Without a run, or with a sink that keeps no numbers, every line
// is appended.
func (e *Engine) AppendRunLog(jobID, step, run string, lines []LogLine) error {
	if e.cfg.Logs == nil {
		return nil
	}
	sink, ok := e.cfg.Logs.(RunLogSink)
	if run == "" || !ok {
		return e.AppendLog(jobID, lines)
	}
	return e.appendPushed(jobID, lines, func(jobID string, lines []LogLine) error {
		return sink.AppendRun(jobID, step, run, lines)
	})
}

// appendPushed masks the job's secret values in lines and writes them
// with write.
func (e *Engine) appendPushed(jobID string, lines []LogLine, write func(string, []LogLine) error) error {
	values, err := e.SecretValues(context.Background(), jobID)
	if err != nil {
		// Lines whose secrets cannot be known (the job or its workspace is
		// gone, the store did not answer) are refused rather than written
		// unmasked: a worker keeps them and tries again, or drops them
		// with a warning on a 404.
		return fmt.Errorf("mask the log lines of job %s: %w", jobID, err)
	}
	return write(jobID, maskLines(lines, values))
}

// appendMasked writes lines to the log sink with values masked.
func (e *Engine) appendMasked(jobID string, lines []LogLine, values []string) error {
	return e.cfg.Logs.Append(jobID, maskLines(lines, values))
}

// maskLines returns lines with values masked, copying them only when
// there is something to mask.
func maskLines(lines []LogLine, values []string) []LogLine {
	if len(values) == 0 {
		return lines
	}
	masked := make([]LogLine, len(lines))
	for i, l := range lines {
		l.Line = Mask(l.Line, values)
		masked[i] = l
	}
	return masked
}
