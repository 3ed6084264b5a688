package engine

import (
	"context"
	"fmt"
	"sync"
)

// holderIndex mirrors, for readers outside the loop, which workers exist
// (with what each proves itself with) and which worker holds each running
// step. The loop writes it wherever it changes a worker's running set;
// log pushes read it, and every report's proof of its worker, so checking
// them costs a map lookup, not a turn of the loop. A reader may see a decision
// a moment before it is committed: harmless, since a step is handed out
// and taken back only by the loop, and a push racing a completion is a
// push made while the step was running.
type holderIndex struct {
	mu      sync.RWMutex
	workers map[string]WorkerCredential
	steps   map[StepRef]string // running step → the worker holding it
}

// WorkerCredential is what a worker proves itself with: the transport
// checks it before a report naming the worker (see WorkerCredential).
type WorkerCredential struct {
	InProcess    bool
	SecretSHA256 string // hex; "" for a worker registered without a secret
}

func credentialOf(w *Worker) WorkerCredential {
	return WorkerCredential{InProcess: w.InProcess, SecretSHA256: w.SecretSHA256}
}

func newHolderIndex() *holderIndex {
	return &holderIndex{workers: map[string]WorkerCredential{}, steps: map[StepRef]string{}}
}

func (h *holderIndex) addWorker(w *Worker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.workers[w.ID] = credentialOf(w)
}

func (h *holderIndex) hold(ss *stepState, workerID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.steps[refOf(ss)] = workerID
}

func (h *holderIndex) drop(ss *stepState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.steps, refOf(ss))
}

// rebuild replaces the index with the loop's state after a (re)load.
func (h *holderIndex) rebuild(st *state) {
	workers := make(map[string]WorkerCredential, len(st.workers))
	steps := map[StepRef]string{}
	for id, wk := range st.workers {
		workers[id] = credentialOf(wk.rec)
		for ss := range wk.running {
			steps[refOf(ss)] = id
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.workers, h.steps = workers, steps
}

// holds reports whether the worker is known, and which worker holds the
// step ("" for none).
func (h *holderIndex) holds(workerID string, ref StepRef) (known bool, holder string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	_, known = h.workers[workerID]
	return known, h.steps[ref]
}

// WorkerCredential is what the worker proves itself with, read without a
// turn of the loop (every report is checked against it first); false for
// an unknown worker.
func (e *Engine) WorkerCredential(workerID string) (WorkerCredential, bool) {
	e.holders.mu.RLock()
	defer e.holders.mu.RUnlock()
	c, ok := e.holders.workers[workerID]
	return c, ok
}

// StepHolder is the worker holding the step while it runs ("" for none),
// read without a turn of the loop: whom a report that names no worker is
// from, for workers that send the interface's bodies to the letter.
func (e *Engine) StepHolder(jobID, step string) string {
	_, holder := e.holders.holds("", StepRef{JobID: jobID, Step: step})
	return holder
}

func refOf(ss *stepState) StepRef { return StepRef{JobID: ss.rec.JobID, Step: ss.rec.Name} }

// reporterErr is the first rule every worker report obeys, whatever the
// transport: it names its worker (ErrInvalid otherwise), a worker the
// engine knows (ErrNotFound).
func reporterErr(workerID string, known bool) error {
	if workerID == "" {
		return fmt.Errorf("%w: worker_id is required: a worker reports only steps it holds", ErrInvalid)
	}
	if !known {
		return fmt.Errorf("worker %s: %w", workerID, ErrNotFound)
	}
	return nil
}

// CheckHolder is the rule for a log push, checked without a turn of the
// loop: the worker must hold the step, and the step must be running, with
// one exception: the worker that held a cancelled step may still push its
// lines, since a cancel ends the step before its killed processes' last
// words reach the server, and a log is evidence.
// ErrInvalid without a worker id; ErrNotFound for an unknown worker, job or
// step; ErrConflict when the step is not running or another worker holds it.
func (e *Engine) CheckHolder(ctx context.Context, workerID, jobID, step string) error {
	known, holder := e.holders.holds(workerID, StepRef{JobID: jobID, Step: step})
	if err := reporterErr(workerID, known); err != nil {
		return err
	}
	if holder == workerID {
		return nil
	}
	if holder != "" {
		// The store may not have the claim yet (see state.claimed).
		return fmt.Errorf("step %q is held by another worker: %w", step, ErrConflict)
	}
	// The refusal is the rare path: read the job to say why.
	_, steps, err := e.Job(ctx, jobID)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s.Name != step {
			continue
		}
		if s.Status == StepCancelled && s.WorkerID != nil && *s.WorkerID == workerID {
			return nil
		}
		if s.Status != StepRunning {
			return fmt.Errorf("step %q is %s: %w", step, s.Status, ErrConflict)
		}
		return fmt.Errorf("step %q is held by another worker: %w", step, ErrConflict)
	}
	return fmt.Errorf("step %q of job %s: %w", step, jobID, ErrNotFound)
}
