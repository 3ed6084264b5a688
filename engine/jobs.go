package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// seqStride spaces flow steps' Seq so that a for_each step's instances
// (at most 10,000) list right after it.
const seqStride = 1 << 16

// buildJobBounded resolves the workspace, task and input and lays out the
// job's step records. It is pure, so it runs in the caller's goroutine;
// input defaults that are templates render in the pool under the render
// limits, and passing one is ErrInvalid.
func (e *Engine) buildJobBounded(req CreateJob) (*jobState, error) {
	ws, ok := e.cfg.Workspaces.Current(req.Workspace)
	if !ok {
		return nil, fmt.Errorf("workspace %q: %w", req.Workspace, ErrNotFound)
	}
	task, ok := ws.Tasks[req.Task]
	if !ok || !workflow.RendersDefaults(task.Input) && !task.RendersConcurrency() {
		return e.buildJobIn(context.Background(), ws, req)
	}
	var js *jobState
	err := e.pool.run(func(ctx context.Context) error {
		var err error
		js, err = e.buildJobIn(ctx, ws, req)
		return err
	})
	if err != nil && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("%w: input: %v", ErrInvalid, err)
	}
	return js, err
}

// buildJobIn lays out a job of a task of a given workspace revision (a
// child job runs on its parent's), rendering under ctx.
func (e *Engine) buildJobIn(ctx context.Context, ws *workflow.Workspace, req CreateJob) (*jobState, error) {
	task, ok := ws.Tasks[req.Task]
	if !ok {
		return nil, fmt.Errorf("task %q in workspace %q: %w", req.Task, req.Workspace, ErrNotFound)
	}
	return e.buildJobOf(ctx, ws, task, req)
}

// buildJobOf lays out a job of the given task, which may be one the engine
// made up (a hook's single action).
func (e *Engine) buildJobOf(ctx context.Context, ws *workflow.Workspace, task *workflow.Task, req CreateJob) (*jobState, error) {
	if req.Strict {
		if err := workflow.CheckInputKeys(task.Input, req.Input); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	}
	input, err := ws.ResolveInputContext(ctx, task.Input, req.Input)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if input == nil {
		input = map[string]any{}
	}
	queue, err := jobQueueOf(ctx, ws, task, input)
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new job id: %w", err)
	}
	source := req.SourceType
	if source == "" {
		source = SourceAPI
	}
	mode := task.Mode
	if mode == "" {
		mode = "distributed"
	}
	path := req.accessPath
	if path == "" {
		path = workflow.TaskPath(task.Folder, req.Task)
	}
	now := e.clock.Now()
	job := &Job{
		ID:         id.String(),
		Workspace:  req.Workspace,
		TaskName:   req.Task,
		AccessPath: path,
		Mode:       mode,
		Status:     JobPending,
		SourceType: source,
		SourceID:   req.SourceID,
		Revision:   ws.Revision,
		Input:      input,
		CreatedAt:  now,
		Queue:      queue,
	}
	if task.Timeout > 0 {
		d := now.Add(time.Duration(task.Timeout))
		job.Deadline = &d
	}
	js := newJobState(job, ws, task)
	js.within = req.within
	for k, name := range task.StepOrder() {
		fs := task.Flow[name]
		action, err := stepAction(ws, name, fs)
		if err != nil {
			return nil, fmt.Errorf("%w: task %q: %v", ErrInvalid, req.Task, err)
		}
		js.add(&stepState{
			rec: &Step{
				JobID:        job.ID,
				Name:         name,
				FlowStep:     name,
				DependsOn:    slices.Clone(fs.DependsOn),
				Index:        -1,
				Seq:          k * seqStride,
				ActionName:   actionName(name, fs),
				ActionType:   action.Type,
				Runner:       runnerOf(action),
				Status:       StepPending,
				RequiredTags: requiredTags(action, e.cfg.RunnerTag),
			},
			flow:   fs,
			action: action,
		})
	}
	if err := js.link(); err != nil {
		return nil, fmt.Errorf("%w: task %q: %v", ErrInvalid, req.Task, err)
	}
	return js, nil
}

func newJobState(job *Job, ws *workflow.Workspace, task *workflow.Task) *jobState {
	return &jobState{job: job, ws: ws, task: task, steps: map[string]*stepState{}, upstream: map[string][]string{}}
}

func (js *jobState) add(ss *stepState) {
	js.steps[ss.rec.Name] = ss
	if !ss.isInstance() {
		js.flow = append(js.flow, ss)
	}
}

// link connects flow step records along depends_on.
func (js *jobState) link() error {
	for _, ss := range js.flow {
		for _, dep := range ss.flow.DependsOn {
			d, ok := js.steps[dep]
			if !ok || d.isInstance() {
				return fmt.Errorf("step %q depends on unknown step %q", ss.rec.Name, dep)
			}
			ss.deps = append(ss.deps, d)
			d.dependents = append(d.dependents, ss)
		}
	}
	return nil
}

// each calls f for every step record: flow steps in Seq order, each
// followed by its instances.
func (js *jobState) each(f func(ss *stepState)) {
	for _, ss := range js.flow {
		f(ss)
		for _, in := range ss.instances {
			f(in)
		}
	}
}

func stepAction(ws *workflow.Workspace, name string, fs *workflow.FlowStep) (*workflow.Action, error) {
	if fs == nil {
		return nil, fmt.Errorf("step %q has no definition", name)
	}
	if fs.Action != "" {
		a, ok := ws.Actions[fs.Action]
		if !ok || a == nil {
			return nil, fmt.Errorf("step %q: unknown action %q", name, fs.Action)
		}
		return a, nil
	}
	if fs.Inline == nil {
		return nil, fmt.Errorf("step %q has neither an action nor an inline action", name)
	}
	return fs.Inline, nil
}

func actionName(step string, fs *workflow.FlowStep) string {
	if fs.Action != "" {
		return fs.Action
	}
	return step
}

// runnerOf names where an action runs: local, docker or pod for worker
// steps, none for the server-side types.
func runnerOf(a *workflow.Action) string {
	switch a.Type {
	case workflow.TypeScript:
		if a.Runner == "" {
			return "local"
		}
		return a.Runner
	case workflow.TypeDocker:
		return "docker"
	case workflow.TypePod:
		return "pod"
	}
	return "none"
}

// requiredTags is the action's tags plus the capability tag of the runner
// it runs with (DESIGN.md "Routing"), as the runners' registry names it.
func requiredTags(a *workflow.Action, runnerTag func(string) string) []string {
	tags := append([]string(nil), a.Tags...)
	if runnerTag != nil {
		tags = append(tags, runnerTag(runnerOf(a)))
	}
	return normTags(tags)
}

// normTags sorts and dedupes a tag list, dropping empty tags.
func normTags(tags []string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t != "" {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	n := 0
	for i, t := range out {
		if i == 0 || t != out[n-1] {
			out[n] = t
			n++
		}
	}
	return out[:n]
}

// insertJob adds a built job to memory, evaluates its root steps and
// returns a copy of the job as it will be committed.
func (e *Engine) insertJob(b *batch, js *jobState) *Job {
	if js.job.Queue != nil || js.job.ParentJobID != "" || len(js.within) > 0 {
		slots := e.slotsOf(js)
		if js.job.Queue != nil {
			q := *js.job.Queue
			q.Slots = slots
			js.job.Queue = &q
		}
		if c := js.task.Concurrency; c != nil && c.OnLimit == workflow.OnLimitSkip && js.job.Queue != nil && e.overLimit(js) {
			return e.insertOverLimit(b, js)
		}
	}
	e.st.jobs[js.job.ID] = js
	e.secrets.put(js.job.ID, js.secretSet())
	// Its steps may be claimed, and run by in-process workers, while the
	// batch creating it is written: their reports (a log push asks whether
	// the job was cancelled) must find it. A failed write's reload closes
	// the channels of a job the store does not have.
	e.notify.add(js.job.ID)
	b.dirtyJob(js.job)
	js.each(func(ss *stepState) { b.dirtyStep(ss.rec) })
	b.newJobs = append(b.newJobs, js.job)
	if js.job.RerunOf != "" {
		b.serverLog(js.job.ID, rerunLine(js))
	}
	if js.job.Queue != nil {
		e.enqueue(b, js)
	} else {
		e.beginJob(b, js)
	}
	c := *js.job
	return &c
}

// beginJob starts a job that may run: its root steps, and in a re-run the
// steps whose dependencies were all reused, are decided; its timeout runs.
func (e *Engine) beginJob(b *batch, js *jobState) {
	// Root steps, and in a re-run the steps whose dependencies were all
	// reused, are decided now; deciding one may decide later ones.
	for _, ss := range js.flow {
		if js.job.Terminal() {
			break
		}
		if ss.rec.Status == StepPending && ss.allDepsTerminal() {
			e.evaluate(b, js, ss)
		}
	}
	e.checkJobDone(b, js)
	if js.job.Deadline != nil && !js.job.Terminal() {
		b.afterCommit(func() { e.armJobTimer(js) })
	}
}

// liveJob finds a job the loop can still change.
func (e *Engine) liveJob(ctx context.Context, id string) (*jobState, error) {
	if js, ok := e.st.jobs[id]; ok {
		if js.job.Terminal() {
			return nil, fmt.Errorf("job %s is %s: %w", id, js.job.Status, ErrConflict)
		}
		return js, nil
	}
	j, err := e.cfg.Store.Job(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	return nil, fmt.Errorf("job %s is %s: %w", id, j.Status, ErrConflict)
}

// liveStep finds a step of a job the loop can still change.
func (e *Engine) liveStep(ctx context.Context, jobID, name string) (*jobState, *stepState, error) {
	js, err := e.liveJob(ctx, jobID)
	if err != nil {
		return nil, nil, err
	}
	ss, ok := js.steps[name]
	if !ok {
		return nil, nil, fmt.Errorf("step %q of job %s: %w", name, jobID, ErrNotFound)
	}
	return js, ss, nil
}

// stopJob ends a job before its steps did, with status: cancelled, or
// failed for a local job whose holder gave up or was lost. Every unfinished
// step is cancelled, and workers running its steps learn it through
// WaitCancelled.
func (e *Engine) stopJob(b *batch, js *jobState, status, reason string) {
	js.each(func(ss *stepState) {
		if ss.terminal() {
			return
		}
		e.unhold(ss)
		e.st.ready.remove(ss)
		e.finishStep(b, ss, StepCancelled, nil)
	})
	e.endJob(b, js, status, reason)
}

// endJob is the end of every job: it takes its final status, the batch
// commits it, and the loop lets it go (jobEnded: its local holder's claims
// answered, its hooks fired, its parent step moved on). A job stopped
// (reason not "") says why in its server log and cancels its live
// children; one that ended by itself (checkJobDone) does neither.
func (e *Engine) endJob(b *batch, js *jobState, status, reason string) {
	now := b.now
	js.job.Status = status
	js.job.CompletedAt = &now
	b.dirtyJob(js.job)
	if reason != "" {
		b.serverLog(js.job.ID, reason)
	}
	b.finished = append(b.finished, js)
	b.endedJobs = append(b.endedJobs, js.job)
	if reason != "" {
		e.cancelChildren(b, js)
	}
	e.releaseSlots(b, js)
	e.jobEnded(b, js)
}

// checkJobDone ends the job once every step is terminal.
func (e *Engine) checkJobDone(b *batch, js *jobState) {
	if js.job.Terminal() {
		return
	}
	done, failed := true, false
	js.each(func(ss *stepState) {
		if !ss.terminal() {
			done = false
		}
		if ss.rec.Status == StepFailed && !ss.flow.ContinueOnFailure {
			failed = true
		}
	})
	if !done {
		return
	}
	var out map[string]any
	for _, ss := range js.flow {
		if len(ss.dependents) == 0 && ss.rec.Output != nil {
			if out == nil {
				out = map[string]any{}
			}
			out[ss.rec.Name] = ss.rec.Output
		}
	}
	status := JobCompleted
	if failed {
		status = JobFailed
	}
	js.job.Output = out
	e.endJob(b, js, status, "")
}

// markJobStarted moves a pending job to running when its first step starts.
func (e *Engine) markJobStarted(b *batch, js *jobState) {
	if js.job.Status != JobPending {
		return
	}
	now := b.now
	js.job.Status = JobRunning
	js.job.StartedAt = &now
	b.dirtyJob(js.job)
}
