package engine

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// load rebuilds memory from the store: live jobs and their steps, workers,
// the ready index and every timer; an ended job whose hooks were pending
// fires them again. At start-up, steps held by in-process workers of the
// previous run (or by workers the store no longer knows) fail, since
// nobody runs them any more; remote workers get a fresh heartbeat grace.
// A reload within one run keeps in-process workers: they are still
// running their steps.
func (e *Engine) load(ctx context.Context, startup bool) error {
	jobs, steps, workers, err := e.cfg.Store.LoadActive(ctx)
	if err != nil {
		return err
	}
	inFlight := 0
	if e.st != nil {
		e.st.stopTimers()
		// The aborted calls still hand back their slots (finishAgent).
		inFlight = e.st.agentsInFlight
	}
	e.st = newState()
	e.st.agentsInFlight = inFlight
	b := newBatch(e.clock.Now())

	for _, w := range workers {
		e.st.workers[w.ID] = &workerState{rec: w, running: map[*stepState]time.Time{}}
	}
	byJob := map[string][]*Step{}
	for _, s := range steps {
		byJob[s.JobID] = append(byJob[s.JobID], s)
	}
	var ready, orphaned, awaiting, agentsLost []*stepState
	var hooksPending []*Job
	for _, j := range jobs {
		if j.Terminal() {
			// An ended job is loaded only while its hooks are pending:
			// they fire below; the job itself does not come back to life.
			if j.HooksPending {
				hooksPending = append(hooksPending, j)
			}
			continue
		}
		js, err := e.restoreJob(j, byJob[j.ID])
		if err != nil {
			e.abandonJob(b, j, byJob[j.ID], err.Error())
			continue
		}
		if err := e.restoreReuse(ctx, js); err != nil {
			// Only reuse is lost: the instances run again.
			e.log.Warn("re-run: cannot reuse for_each instances", "job", j.ID, "err", err)
		}
		e.st.jobs[j.ID] = js
		e.notify.add(j.ID)
		if j.Deadline != nil {
			b.afterCommit(func() { e.armJobTimer(js) })
		}
		js.each(func(ss *stepState) {
			switch {
			case ss.rec.Status == StepReady:
				ready = append(ready, ss)
			case ss.awaitingRetry():
				b.afterCommit(func() { e.armRetryTimer(js, ss) })
			case ss.rec.Status == StepRunning && ss.rec.ChildJobID != "":
				awaiting = append(awaiting, ss)
			case ss.rec.Status == StepRunning && ss.rec.ActionType == workflow.TypeAgent && len(ss.instances) == 0:
				agentsLost = append(agentsLost, ss)
			case ss.rec.Status == StepRunning && len(ss.instances) == 0:
				wk, ok := e.st.workers[derefOr(ss.rec.WorkerID)]
				if !ok || wk.rec.Status != WorkerActive || startup && wk.rec.InProcess {
					orphaned = append(orphaned, ss)
					return
				}
				wk.running[ss] = time.Time{}
				if ss.rec.Deadline != nil {
					b.afterCommit(func() { e.armStepTimer(js, ss) })
				}
			}
		})
	}

	// Rebuild the lines and slots of the concurrency limits, holders in
	// the order they were created, waiters in line.
	var queued []*jobState
	for _, js := range e.st.jobs {
		if js.job.Queue != nil {
			queued = append(queued, js)
		}
	}
	sort.Slice(queued, func(a, b int) bool {
		ja, jb := queued[a].job, queued[b].job
		if !ja.CreatedAt.Equal(jb.CreatedAt) {
			return ja.CreatedAt.Before(jb.CreatedAt)
		}
		return ja.ID < jb.ID
	})
	for _, js := range queued {
		e.restoreSlots(js)
	}

	// Rebuild the ready index in the order steps became ready.
	sort.SliceStable(ready, func(i, j int) bool {
		ri, rj := ready[i].rec, ready[j].rec
		if ri.ReadyAt != nil && rj.ReadyAt != nil && !ri.ReadyAt.Equal(*rj.ReadyAt) {
			return ri.ReadyAt.Before(*rj.ReadyAt)
		}
		if ri.JobID != rj.JobID {
			return ri.JobID < rj.JobID
		}
		return ri.Seq < rj.Seq
	})
	for _, ss := range ready {
		if js := e.st.jobs[ss.rec.JobID]; js == nil || localHolder(js.job) == "" { // a local job's holder claims its steps by job
			e.st.ready.push(ss, isConsumer(js))
		}
	}

	for _, wk := range e.st.workers {
		switch {
		case startup && wk.rec.InProcess && wk.rec.Status == WorkerActive:
			wk.rec.Status = WorkerInactive
			b.dirtyWorker(wk.rec)
		case !wk.rec.InProcess && wk.rec.Status == WorkerActive:
			b.afterCommit(func() { e.armHeartbeat(wk, e.cfg.HeartbeatTimeout) })
		}
	}
	// A task step waits for its child job, which was loaded with the rest;
	// both change in one commit, so a child is missing only if it had to
	// be abandoned above.
	for _, ss := range awaiting {
		if child, ok := e.st.jobs[ss.rec.ChildJobID]; !ok || child.job.Terminal() {
			e.fail(b, e.st.jobs[ss.rec.JobID], ss, fmt.Sprintf("child job %s did not resume", ss.rec.ChildJobID))
		}
	}
	// An agent call does not survive the server: its step fails.
	for _, ss := range agentsLost {
		e.fail(b, e.st.jobs[ss.rec.JobID], ss, "agent: the server stopped during the call")
	}
	for _, ss := range orphaned {
		js := e.st.jobs[ss.rec.JobID]
		name := derefOr(ss.rec.WorkerID)
		if wk, ok := e.st.workers[name]; ok {
			name = wk.rec.Name
		}
		msg := fmt.Sprintf("Worker heartbeat timeout (worker %s unresponsive)", name)
		e.failAttempt(b, js, ss, msg, 0)
	}
	// A step whose templates were rendering off the loop is still pending
	// in the store: decide it again (so too a hand-edited store's).
	for _, js := range e.st.jobs {
		if js.job.Queued() {
			continue // it begins when it gets its slots
		}
		for _, ss := range js.flow {
			if js.job.Terminal() {
				break
			}
			if ss.rec.Status == StepPending && !ss.awaitingRetry() && ss.allDepsTerminal() {
				e.evaluate(b, js, ss)
			}
			for _, in := range nextInstances(ss) {
				e.prepare(b, js, in)
			}
		}
		e.checkJobDone(b, js)
	}

	for _, j := range hooksPending {
		e.recoverHooks(b, j, byJob[j.ID])
	}
	// A limit raised, or a queue dropped, while the server was down.
	e.pumpAll(b)

	e.holders.rebuild(e.st)
	e.secrets.rebuild(e.st)
	if err := e.commit(ctx, b); err != nil {
		return fmt.Errorf("commit recovered state: %w", err)
	}
	e.finishBatch(b, e.effectsOf(b))
	return nil
}

// nextInstances lists the pending instances of a running for_each step
// that should be rendering: all of them, or a sequential step's next one.
func nextInstances(p *stepState) []*stepState {
	if p.rec.Status != StepRunning || len(p.instances) == 0 {
		return nil
	}
	var out []*stepState
	for _, in := range p.instances {
		if p.flow.Sequential && !in.terminal() {
			if in.rec.Status == StepPending && !in.awaitingRetry() {
				return []*stepState{in}
			}
			return nil
		}
		if in.rec.Status == StepPending && !in.awaitingRetry() {
			out = append(out, in)
		}
	}
	return out
}

// reload replaces memory with the store's state after a failed commit.
// Parked claims are answered with no work: their workers poll again.
func (e *Engine) reload(ctx context.Context) error {
	for _, w := range e.st.waiters.drain() {
		w.got <- claimResult{}
	}
	// A key whose job the failed write lost must make a job again.
	e.keys = recentKeys{}
	if err := e.load(ctx, false); err != nil {
		return err
	}
	for _, id := range e.notify.ids() {
		if _, ok := e.st.jobs[id]; ok {
			continue
		}
		j, err := e.cfg.Store.Job(ctx, id)
		e.notify.finish(id, err == nil && j.Status == JobCancelled)
	}
	return nil
}

// restoreJob links a loaded job's steps to the workspace revision it runs on.
func (e *Engine) restoreJob(j *Job, steps []*Step) (*jobState, error) {
	ws, ok := e.cfg.Workspaces.Revision(j.Workspace, j.Revision)
	if !ok {
		ws, ok = e.cfg.Workspaces.Current(j.Workspace)
	}
	if !ok {
		return nil, fmt.Errorf("workspace %q is no longer loaded", j.Workspace)
	}
	task, ok := ws.Tasks[j.TaskName]
	if !ok && j.SourceType == SourceHook {
		task, ok = hookTask(ws, j.TaskName)
	}
	if !ok {
		return nil, fmt.Errorf("task %q is no longer in workspace %q", j.TaskName, j.Workspace)
	}
	js := newJobState(j, ws, task)
	sort.Slice(steps, func(a, b int) bool { return steps[a].Seq < steps[b].Seq })
	for _, rec := range steps {
		fs, ok := task.Flow[rec.FlowStep]
		if !ok {
			return nil, fmt.Errorf("step %q is no longer in task %q", rec.FlowStep, j.TaskName)
		}
		action, err := stepAction(ws, rec.FlowStep, fs)
		if err != nil {
			return nil, err
		}
		ss := &stepState{rec: rec, flow: fs, action: action}
		if rec.Index >= 0 {
			p, ok := js.steps[rec.FlowStep]
			if !ok || p.isInstance() {
				return nil, fmt.Errorf("instance %q has no parent step", rec.Name)
			}
			ss.parent = p
			p.instances = append(p.instances, ss)
		}
		js.add(ss)
	}
	if err := js.link(); err != nil {
		return nil, err
	}
	return js, nil
}

// abandonJob fails a loaded job that can no longer run on any loaded
// workspace revision.
func (e *Engine) abandonJob(b *batch, j *Job, steps []*Step, reason string) {
	msg := "job cannot resume: " + reason
	for _, s := range steps {
		if !StepTerminal(s.Status) {
			m := msg
			s.Status = StepFailed
			s.ErrorMessage = &m
			s.CompletedAt = &b.now
			b.dirtyStep(s)
		}
	}
	j.Status = JobFailed
	j.CompletedAt = &b.now
	b.dirtyJob(j)
	b.serverLog(j.ID, msg)
	js := newJobState(j, &workflow.Workspace{}, &workflow.Task{})
	e.st.jobs[j.ID] = js
	b.finished = append(b.finished, js)
	b.endedJobs = append(b.endedJobs, j)
}

func derefOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
