package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// A re-run is a new job of an old job's task on the workspace's current
// revision. From the failed steps, it also takes over the steps that
// completed in the old job: their records are laid out completed, with
// the old input, output and times and reused_from naming the old job, so
// the loop promotes their dependents as it would after a run. A completed
// step is reused only while every step it depends on is reused too, so a
// reused output never sits downstream of one computed again (a step that
// completed after a failure through continue_on_failure, or one whose
// skipped dependency is evaluated again, runs again).
//
// A for_each step that did not complete is expanded again (its list is
// rendered again); instance i takes over the old instance i when that one
// completed and its item is equal (as JSON) to the new one, and the step's
// dependencies are all reused. The others run.

// rerunRequest completes a re-run's request from the old job: its
// workspace, task and (unless given) input. With FromFailed it returns the
// old job's steps, to reuse.
func (e *Engine) rerunRequest(ctx context.Context, req *CreateJob) ([]*Step, error) {
	id := req.Rerun.JobID
	old, err := e.cfg.Store.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	if req.Rerun.FromFailed && old.Status != JobFailed && old.Status != JobCancelled {
		return nil, fmt.Errorf("job %s is %s: only a failed or cancelled job can be re-run from its failed steps (re-run it whole instead): %w", id, old.Status, ErrConflict)
	}
	if old.SourceType == SourceHook {
		return nil, fmt.Errorf("job %s is a hook job: hooks run again with the job that fires them: %w", id, ErrConflict)
	}
	ws, ok := e.cfg.Workspaces.Current(old.Workspace)
	if !ok {
		return nil, fmt.Errorf("job %s: workspace %q is no longer loaded: %w", id, old.Workspace, ErrConflict)
	}
	if _, ok := ws.Tasks[old.TaskName]; !ok {
		return nil, fmt.Errorf("job %s: task %q is no longer in workspace %q: %w", id, old.TaskName, old.Workspace, ErrConflict)
	}
	req.Workspace, req.Task = old.Workspace, old.TaskName
	if req.Input == nil {
		// The old input was checked when it was given; keys the task no
		// longer declares are dropped, not refused.
		req.Input, req.Strict = old.Input, false
	}
	if !req.Rerun.FromFailed {
		return nil, nil
	}
	steps, err := e.cfg.Store.Steps(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("steps of job %s: %w", id, err)
	}
	return steps, nil
}

// markRerun records what a built job re-runs and lays out the steps it
// reuses from the old job's steps.
func markRerun(js *jobState, r *Rerun, old []*Step) {
	js.job.RerunOf = r.JobID
	if !r.FromFailed {
		return
	}
	js.job.RerunFromFailed = true
	reuseCompleted(js, r.JobID, old)
	reuseInstances(js, old)
}

// reuseCompleted lays out the flow steps the re-run takes over, with their
// for_each instances.
func reuseCompleted(js *jobState, oldID string, old []*Step) {
	records := map[string]*Step{}
	instances := map[string][]*Step{} // by flow step, in index order (Steps is ordered by Seq)
	for _, s := range old {
		if s.Index < 0 {
			records[s.Name] = s
		} else {
			instances[s.FlowStep] = append(instances[s.FlowStep], s)
		}
	}
	memo := map[*stepState]bool{}
	var reused func(ss *stepState) bool
	reused = func(ss *stepState) bool {
		if v, ok := memo[ss]; ok {
			return v
		}
		o := records[ss.rec.Name]
		ok := o != nil && o.Status == StepCompleted
		for _, d := range ss.deps {
			ok = ok && reused(d)
		}
		memo[ss] = ok
		return ok
	}
	for _, p := range js.flow {
		if !reused(p) {
			continue
		}
		reuseRecord(p.rec, records[p.rec.Name], oldID)
		for _, o := range instances[p.rec.Name] {
			in := &stepState{rec: instanceRecord(p.rec, o.Index, o.Item), flow: p.flow, action: p.action, parent: p}
			reuseRecord(in.rec, o, oldID)
			p.instances = append(p.instances, in)
			js.add(in)
		}
	}
}

// reuseInstances notes, for each for_each step still to expand whose
// dependencies are all reused, the old job's completed instances, which
// expand takes over when their items are equal.
func reuseInstances(js *jobState, old []*Step) {
	for _, p := range js.flow {
		if p.flow.ForEach == nil || p.rec.Status != StepPending || !depsReused(p) {
			continue
		}
		for _, o := range old {
			if o.FlowStep != p.rec.Name || o.Index < 0 || o.Status != StepCompleted {
				continue
			}
			if js.reuse == nil {
				js.reuse = map[string]map[int]*Step{}
			}
			if js.reuse[p.rec.Name] == nil {
				js.reuse[p.rec.Name] = map[int]*Step{}
			}
			js.reuse[p.rec.Name][o.Index] = o
		}
	}
}

func depsReused(ss *stepState) bool {
	for _, d := range ss.deps {
		if d.rec.ReusedFrom == "" {
			return false
		}
	}
	return true
}

// reusedInstance is the old instance a for_each step's instance i with
// item takes over, or nil.
func (js *jobState) reusedInstance(step string, i int, item any) *Step {
	o := js.reuse[step][i]
	if o == nil {
		return nil
	}
	a, err1 := json.Marshal(o.Item)
	b, err2 := json.Marshal(item)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		return nil
	}
	return o
}

// reuseRecord makes rec the completed record of a step that ran in job
// oldID as o: its input, output and times are the old ones (when the work
// was done), and no worker holds it in this job.
func reuseRecord(rec, o *Step, oldID string) {
	rec.Status = StepCompleted
	rec.Input = o.Input
	rec.Output = o.Output
	rec.StartedAt = o.StartedAt
	rec.CompletedAt = o.CompletedAt
	rec.Message = o.Message
	rec.ChildJobID = o.ChildJobID
	rec.ReusedFrom = oldID
}

// restoreReuse rebuilds a loaded re-run's for_each reuse, which lives in
// memory until its step expands.
func (e *Engine) restoreReuse(ctx context.Context, js *jobState) error {
	if !js.job.RerunFromFailed {
		return nil
	}
	pending := false
	for _, p := range js.flow {
		pending = pending || p.flow.ForEach != nil && p.rec.Status == StepPending
	}
	if !pending {
		return nil
	}
	old, err := e.cfg.Store.Steps(ctx, js.job.RerunOf)
	if err != nil {
		return fmt.Errorf("steps of job %s, which job %s re-runs: %w", js.job.RerunOf, js.job.ID, err)
	}
	reuseInstances(js, old)
	return nil
}

// rerunLine is the `_server` line that opens a re-run's log.
func rerunLine(js *jobState) string {
	if !js.job.RerunFromFailed {
		return fmt.Sprintf("re-run of job %s", js.job.RerunOf)
	}
	n := 0
	js.each(func(ss *stepState) {
		if ss.rec.ReusedFrom != "" {
			n++
		}
	})
	return fmt.Sprintf("re-run of job %s from its failed steps; completed step records reused: %d", js.job.RerunOf, n)
}
