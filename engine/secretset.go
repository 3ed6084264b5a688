package engine

import (
	"sort"
	"sync"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// secretSet is one job's secret values, gathered as the job learns them:
// when it is built (its input, the workspace's secrets) and as each step's
// input is resolved. The loop adds; log pushes read from their own
// goroutines, so masking a line never reads the store.
type secretSet struct {
	mu     sync.RWMutex
	seen   map[string]bool
	sorted []string // longest first; nil after an add until values sorts again
}

func newSecretSet() *secretSet { return &secretSet{seen: map[string]bool{}} }

// add records v if it is a string long enough to mask.
func (s *secretSet) add(v any) {
	str, ok := v.(string)
	if !ok || len(str) < minMaskedLen {
		return
	}
	s.mu.RLock()
	known := s.seen[str]
	s.mu.RUnlock()
	if known {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[str] = true
	s.sorted = nil
}

// addJob records the secrets a job has from the start: its input fields
// defined secret (and secret properties of its connections), and the
// workspace's secrets. task is nil when no longer defined.
func (s *secretSet) addJob(ws *workflow.Workspace, task *workflow.Task, input map[string]any) {
	if task != nil {
		secretInputs(ws, task.Input, input, s.add)
	}
	for _, v := range ws.Secrets {
		s.add(v)
	}
}

// addStep records the secrets of a step's resolved input, as its action
// defines them.
func (s *secretSet) addStep(ws *workflow.Workspace, a *workflow.Action, input map[string]any) {
	if a != nil {
		secretInputs(ws, a.Input, input, s.add)
	}
}

// addRecord records the secrets of a step record: its input and, for an
// approval, the input its approver gave.
func (s *secretSet) addRecord(ws *workflow.Workspace, a *workflow.Action, st *Step) {
	s.addStep(ws, a, st.Input)
	s.addStep(ws, a, approverInput(a, st))
}

// values lists the set longest first, so a secret that contains another
// is masked whole. The slice is shared: callers must not change it.
func (s *secretSet) values() []string {
	s.mu.RLock()
	out := s.sorted
	n := len(s.seen)
	s.mu.RUnlock()
	if out != nil || n == 0 {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sorted == nil {
		s.sorted = sortedSecrets(s.seen)
	}
	return s.sorted
}

func sortedSecrets(seen map[string]bool) []string {
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Slice(out, func(a, b int) bool {
		if len(out[a]) != len(out[b]) {
			return len(out[a]) > len(out[b])
		}
		return out[a] < out[b]
	})
	return out
}

// secretRegistry mirrors, for readers outside the loop, the secret set of
// every live job (as holderIndex mirrors the holders). The loop registers
// a job when it takes it in and drops it once the job's log is finished;
// a job not here is read from the store.
type secretRegistry struct {
	mu   sync.RWMutex
	jobs map[string]*secretSet
}

func newSecretRegistry() *secretRegistry {
	return &secretRegistry{jobs: map[string]*secretSet{}}
}

func (r *secretRegistry) put(jobID string, s *secretSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[jobID] = s
}

func (r *secretRegistry) drop(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, jobID)
}

func (r *secretRegistry) get(jobID string) (*secretSet, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.jobs[jobID]
	return s, ok
}

// rebuild replaces the registry with the loop's jobs after a (re)load.
func (r *secretRegistry) rebuild(st *state) {
	jobs := make(map[string]*secretSet, len(st.jobs))
	for id, js := range st.jobs {
		jobs[id] = js.secretSet()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = jobs
}
