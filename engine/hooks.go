package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// fireHooks creates the hook jobs of a job that has just ended: the task's
// on_success (completed) or on_error (failed or cancelled) hooks, or, for a
// top-level job of a task with none for that event, the workspace's. Hook
// jobs fire no hooks of their own. A hook that cannot start is a `_server`
// line in the job's log.
func (e *Engine) fireHooks(b *batch, js *jobState) {
	if js.job.SourceType == SourceHook {
		e.reportHookJob(b, js)
		return
	}
	e.startHooks(b, js, false)
}

// startHooks creates the job's hook jobs in this commit, or, when their
// inputs render a template, hands the renders to the pool and marks the
// job's hooks pending in this commit (the one that ends the job): the hook
// jobs are created, in order, in the commit that clears the mark, and a
// restart in between fires them again (recovered). A recovered job's log
// is finished again once its hooks have logged, so an archive that missed
// those lines catches up.
func (e *Engine) startHooks(b *batch, js *jobState, recovered bool) {
	hooks := e.hooksFor(js)
	if len(hooks) == 0 {
		e.hooksStarted(b, js, recovered)
		return
	}
	vars := map[string]any{"hook": hookContext(js)}
	secrets := make(map[string]any, len(js.ws.Secrets))
	for k, v := range js.ws.Secrets {
		secrets[k] = v
	}
	vars["secret"], vars["secrets"] = secrets, secrets
	// A hook's input map reads `input` as a flow step's does: the job's
	// input, masked like every hook context value.
	input := make(map[string]any, len(js.job.Input))
	for k, v := range MaskMap(js.job.Input, js.secretSet().values()) {
		input[k] = v
	}
	vars["input"] = input
	renders := false
	for _, h := range hooks {
		renders = renders || hookRenders(js.ws, h)
	}
	build := func(ctx context.Context) func(b *batch) {
		built := make([]*jobState, len(hooks))
		errs := make([]error, len(hooks))
		for i, h := range hooks {
			built[i], errs[i] = e.buildHookJob(ctx, js, h, vars)
		}
		return func(b *batch) {
			for i, h := range hooks {
				e.startHook(b, js.job.ID, h, built[i], errs[i])
			}
			e.hooksStarted(b, js, recovered)
		}
	}
	if !renders {
		build(context.Background())(b)
		return
	}
	js.job.HooksPending = true
	b.dirtyJob(js.job)
	e.st.hooking[js.job.ID] = js
	e.offLoop(build, func(b *batch, apply func(b *batch), err error) {
		if e.st.hooking[js.job.ID] != js {
			return
		}
		delete(e.st.hooking, js.job.ID)
		b.maskAs(js)
		if err != nil {
			for _, h := range hooks {
				e.startHook(b, js.job.ID, h, nil, err)
			}
			e.hooksStarted(b, js, recovered)
			return
		}
		apply(b)
	})
}

// hooksStarted clears the job's pending mark, if set, in the commit that
// creates its hook jobs or logs why they did not start.
func (e *Engine) hooksStarted(b *batch, js *jobState, recovered bool) {
	if !js.job.HooksPending {
		return
	}
	js.job.HooksPending = false
	b.dirtyJob(js.job)
	if recovered {
		b.finished = append(b.finished, js)
	}
}

// recoverHooks fires again, at load, the hooks of a job that ended but
// whose hook jobs were never created. The job itself is not live: it does
// not run, time out or count, and it is not loaded into memory.
func (e *Engine) recoverHooks(b *batch, j *Job, steps []*Step) {
	js, err := e.restoreJob(j, steps)
	if err != nil {
		b.serverLog(j.ID, "hooks could not fire after a restart: "+err.Error())
		j.HooksPending = false
		b.dirtyJob(j)
		b.finished = append(b.finished, newJobState(j, &workflow.Workspace{}, &workflow.Task{}))
		return
	}
	e.startHooks(b, js, true)
}

func (e *Engine) startHook(b *batch, jobID string, h *workflow.Hook, hj *jobState, err error) {
	if err != nil {
		b.serverLog(jobID, fmt.Sprintf("hook %q did not start: %v", h.Action, err))
		return
	}
	b.serverLog(jobID, fmt.Sprintf("hook %q started job %s", h.Action, hj.job.ID))
	e.insertJob(b, hj)
}

// hookRenders reports whether starting the hook renders a template: its
// input, or input defaults of what it runs.
func hookRenders(ws *workflow.Workspace, h *workflow.Hook) bool {
	if template.HasTemplate(h.Input) {
		return true
	}
	if a, ok := ws.Actions[h.Action]; ok {
		if a.Type == workflow.TypeTask {
			t, ok := ws.Tasks[a.Task]
			return ok && (workflow.RendersDefaults(t.Input) || t.RendersConcurrency())
		}
		return workflow.RendersDefaults(a.Input)
	}
	return false
}

func (e *Engine) hooksFor(js *jobState) []*workflow.Hook {
	success := js.job.Status == JobCompleted
	hooks := js.task.OnError
	if success {
		hooks = js.task.OnSuccess
	}
	if len(hooks) > 0 || js.job.ParentJobID != "" {
		return hooks
	}
	if success {
		return js.ws.OnSuccess
	}
	return js.ws.OnError
}

// buildHookJob renders a hook's input with the hook context and lays out
// its job: a job of the task a task action names, or a one-step job of the
// action itself.
func (e *Engine) buildHookJob(ctx context.Context, js *jobState, h *workflow.Hook, vars map[string]any) (*jobState, error) {
	input := map[string]any{}
	if h.Input != nil {
		v, err := js.ws.Templates.EvalValueContext(ctx, h.Input, vars)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("input rendered to %T, not an object", v)
		}
		input = m
	}
	source := js.job.ID
	// A hook job is judged as the job that fired it: whatever action it
	// runs, and however that action is named, its input is that job's data.
	req := CreateJob{Workspace: js.job.Workspace, Input: input, SourceType: SourceHook, SourceID: &source, accessPath: js.job.AccessPath,
		within: heldBy(js)}
	if a, ok := js.ws.Actions[h.Action]; ok && a.Type == workflow.TypeTask {
		req.Task = a.Task
		return e.buildJobIn(ctx, js.ws, req)
	}
	task, ok := hookTask(js.ws, h.Action)
	if !ok {
		return nil, fmt.Errorf("unknown action %q", h.Action)
	}
	req.Task = h.Action
	return e.buildJobOf(ctx, js.ws, task, req)
}

// hookTask is the task a hook job of a non-task action runs: one step,
// named after the action, taking the hook's rendered input as its own. The
// job's task_name is the action's name.
func hookTask(ws *workflow.Workspace, action string) (*workflow.Task, bool) {
	a, ok := ws.Actions[action]
	if !ok || a.Type == workflow.TypeTask {
		return nil, false
	}
	return &workflow.Task{
		Name:      action,
		Mode:      "distributed",
		Flow:      map[string]*workflow.FlowStep{action: {Inline: a}},
		FlowOrder: []string{action},
	}, true
}

// reportHookJob writes a hook job's failure into the log of the job that
// fired it.
func (e *Engine) reportHookJob(b *batch, hj *jobState) {
	if hj.job.Status == JobCompleted || hj.job.SourceID == nil {
		return
	}
	b.serverLog(*hj.job.SourceID, fmt.Sprintf("hook job %s (%s) %s", hj.job.ID, hj.job.TaskName, hj.job.Status))
}

// hookContext is the `hook.*` variables of the interface, with the job's
// secret values masked as in its log: whatever a hook renders from them
// (its job's input, and so that job's detail and log) shows *** instead.
// A hook that needs a secret names it (`{{ secret.TOKEN }}`).
func hookContext(js *jobState) map[string]any {
	j := js.job
	var failed []any
	var errs []string
	js.each(func(ss *stepState) {
		if ss.rec.Status != StepFailed {
			return
		}
		var msg any
		if ss.rec.ErrorMessage != nil {
			msg = *ss.rec.ErrorMessage
			errs = append(errs, ss.rec.Name+": "+*ss.rec.ErrorMessage)
		}
		failed = append(failed, map[string]any{
			"step_name":           ss.rec.Name,
			"action_name":         ss.rec.ActionName,
			"error_message":       msg,
			"continue_on_failure": ss.flow.ContinueOnFailure,
		})
	})
	if failed == nil {
		failed = []any{}
	}
	ctx := map[string]any{
		"workspace":     j.Workspace,
		"task_name":     j.TaskName,
		"job_id":        j.ID,
		"status":        j.Status,
		"is_success":    j.Status == JobCompleted,
		"error_message": nil,
		"source_type":   j.SourceType,
		"source_id":     nil,
		"started_at":    timestamp(j.StartedAt),
		"completed_at":  timestamp(j.CompletedAt),
		"duration_secs": nil,
		"failed_steps":  failed,
	}
	if len(errs) > 0 {
		ctx["error_message"] = strings.Join(errs, "\n")
	}
	if j.SourceID != nil {
		ctx["source_id"] = *j.SourceID
	}
	if j.StartedAt != nil && j.CompletedAt != nil {
		ctx["duration_secs"] = j.CompletedAt.Sub(*j.StartedAt).Seconds()
	}
	return MaskMap(ctx, js.secretValues())
}

// timeFormat is how timestamps appear inside template variables and
// outputs: RFC 3339 in UTC, as the API writes them.
const timeFormat = time.RFC3339Nano

func timestamp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(timeFormat)
}
