package engine

import (
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
)

func (e *Engine) registerWorker(b *batch, name string, tags []string, inProcess bool, secretSHA256 string) (string, error) {
	id := uuid.NewString()
	wk := &workerState{
		rec: &Worker{
			ID:           id,
			Name:         name,
			Tags:         tags,
			Status:       WorkerActive,
			LastSeen:     b.now,
			RegisteredAt: b.now,
			InProcess:    inProcess,
			SecretSHA256: secretSHA256,
		},
		running: map[*stepState]time.Time{},
	}
	e.st.workers[id] = wk
	e.holders.addWorker(wk.rec)
	b.dirtyWorker(wk.rec)
	if !inProcess {
		b.afterCommit(func() { e.armHeartbeat(wk, e.cfg.HeartbeatTimeout) })
	}
	return id, nil
}

func (e *Engine) heartbeat(b *batch, id string, running []StepRef) error {
	wk, ok := e.st.workers[id]
	if !ok {
		return fmt.Errorf("worker %s: %w", id, ErrNotFound)
	}
	e.touchWorker(b, wk)
	if running != nil {
		e.reconcile(b, wk, running)
	}
	return nil
}

// reconcile compares the steps a worker says it runs with those it holds.
// A held step it does not name, claimed long enough ago that the answer
// must have reached it, was lost on the way (the claim's answer never
// arrived): not started, it goes back to ready for any worker; started,
// it fails, since whatever ran it is gone. A worker names a step from the
// moment its claim arrives until its completion is acknowledged.
func (e *Engine) reconcile(b *batch, wk *workerState, running []StepRef) {
	named := make(map[StepRef]bool, len(running))
	for _, r := range running {
		named[r] = true
	}
	grace := e.cfg.HeartbeatTimeout / 3
	var lost []*stepState
	for ss, claimed := range wk.running {
		if named[StepRef{JobID: ss.rec.JobID, Step: ss.rec.Name}] {
			if ss.rec.Unconfirmed {
				ss.rec.Unconfirmed = false
				b.dirtyStep(ss.rec)
			}
		} else if b.now.Sub(claimed) >= grace {
			lost = append(lost, ss)
		}
	}
	sortSteps(lost)
	for _, ss := range lost {
		js := e.st.jobs[ss.rec.JobID]
		if ss.rec.StartedAt == nil || ss.rec.Unconfirmed {
			b.serverLog(js.job.ID, fmt.Sprintf("step %q: worker %s never received its claim; it is ready again", ss.rec.Name, wk.rec.Name))
			e.release(b, wk.rec.ID, ss.rec.JobID, ss.rec.Name)
			continue
		}
		e.unhold(ss)
		e.failAttempt(b, js, ss, fmt.Sprintf("Worker %s no longer runs this step", wk.rec.Name), 0)
	}
}

// touchWorker records a sign of life: last seen now, active again, and a
// fresh heartbeat deadline.
func (e *Engine) touchWorker(b *batch, wk *workerState) {
	wk.rec.LastSeen = b.now
	wk.rec.Status = WorkerActive
	b.dirtyWorker(wk.rec)
	if !wk.rec.InProcess {
		b.afterCommit(func() { e.armHeartbeat(wk, e.cfg.HeartbeatTimeout) })
	}
}

// armHeartbeat (re)starts a remote worker's silence timer. The callback
// names the last-seen time it was armed for, so a heartbeat that raced it
// wins.
func (e *Engine) armHeartbeat(wk *workerState, d time.Duration) {
	stopTimer(&wk.timer)
	id, seen := wk.rec.ID, wk.rec.LastSeen
	wk.timer = e.clock.AfterFunc(d, func() {
		e.post(func(b *batch) (any, error) {
			e.workerSilent(b, id, seen)
			return nil, nil
		})
	})
}

func (e *Engine) workerSilent(b *batch, id string, seen time.Time) {
	wk, ok := e.st.workers[id]
	if !ok || wk.rec.InProcess || wk.rec.Status != WorkerActive || !wk.rec.LastSeen.Equal(seen) {
		return
	}
	e.log.Warn("worker heartbeat timeout", "worker", wk.rec.Name, "id", id)
	e.loseWorker(b, wk)
}

// loseWorker marks a worker inactive and fails every step it was running;
// the DAG moves on as for any failure.
func (e *Engine) loseWorker(b *batch, wk *workerState) {
	wk.rec.Status = WorkerInactive
	b.dirtyWorker(wk.rec)
	stopTimer(&wk.timer)
	msg := fmt.Sprintf("Worker heartbeat timeout (worker %s unresponsive)", wk.rec.Name)
	steps := make([]*stepState, 0, len(wk.running))
	for ss := range wk.running {
		steps = append(steps, ss)
	}
	sortSteps(steps)
	for _, ss := range steps {
		js := e.st.jobs[ss.rec.JobID]
		e.unhold(ss)
		e.failAttempt(b, js, ss, msg, 0)
	}
	e.loseLocalJobs(b, wk)
}

// sortSteps orders steps by job, then position, so decisions over a set of
// them happen in the same order every time.
func sortSteps(steps []*stepState) {
	sort.Slice(steps, func(i, j int) bool {
		if steps[i].rec.JobID != steps[j].rec.JobID {
			return steps[i].rec.JobID < steps[j].rec.JobID
		}
		return steps[i].rec.Seq < steps[j].rec.Seq
	})
}
