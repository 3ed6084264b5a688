package engine

import (
	"fmt"
)

// maxChildDepth is the interface's limit on nested child jobs.
const maxChildDepth = 10

// startChild dispatches a task step: its child job, built on the parent's
// workspace revision (prepWork), is created in the same commit, and the
// step runs until the child ends.
func (e *Engine) startChild(b *batch, js *jobState, ss *stepState, input map[string]any, child *jobState) {
	parentID := js.job.ID
	child.job.ParentJobID = parentID
	child.job.ParentStep = ss.rec.Name
	child.job.Depth = js.job.Depth + 1

	ss.rec.Input = input
	js.noteInput(ss)
	ss.rec.ChildJobID = child.job.ID
	e.startOnServer(b, js, ss, StepRunning)
	b.serverLog(parentID, fmt.Sprintf("step %q started child job %s (task %q)", ss.rec.Name, child.job.ID, ss.action.Task))
	e.insertJob(b, child)
}

// jobEnded does what a job's end sets off: its hooks fire, and a child
// job's parent step moves on.
func (e *Engine) jobEnded(b *batch, js *jobState) {
	e.localJobEnded(b, js)
	e.fireHooks(b, js)
	e.childEnded(b, js)
}

// childEnded moves a child job's parent step on once the child is
// terminal: completed with the child's output, or failed naming the child.
func (e *Engine) childEnded(b *batch, child *jobState) {
	if child.job.ParentJobID == "" {
		return
	}
	parent, ok := e.st.jobs[child.job.ParentJobID]
	if !ok || parent.job.Terminal() {
		return
	}
	ss, ok := parent.steps[child.job.ParentStep]
	if !ok || ss.rec.Status != StepRunning || ss.rec.ChildJobID != child.job.ID {
		return
	}
	if child.job.Status == JobCompleted {
		ss.rec.Output = child.job.Output
		e.finishStep(b, ss, StepCompleted, nil)
		e.stepDone(b, parent, ss)
		return
	}
	e.fail(b, parent, ss, fmt.Sprintf("child job %s %s", child.job.ID, child.job.Status))
}

// cancelChildren cancels the live child jobs of a cancelled job, and so on
// down: their parent steps are already cancelled.
func (e *Engine) cancelChildren(b *batch, js *jobState) {
	js.each(func(ss *stepState) {
		if ss.rec.ChildJobID == "" {
			return
		}
		if child, ok := e.st.jobs[ss.rec.ChildJobID]; ok && !child.job.Terminal() {
			e.stopJob(b, child, JobCancelled, fmt.Sprintf("parent job %s cancelled", js.job.ID))
		}
	})
}
