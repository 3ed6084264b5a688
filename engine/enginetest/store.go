package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/appliance-sh/appliance/engine"
)

// MemStore is a simple, real engine.Store held in maps. Records go in and
// out as JSON copies, as they would through a database, so the engine can
// never share memory with its readers.
type MemStore struct {
	mu        sync.Mutex
	jobs      map[string][]byte
	jobOrder  []string                     // creation order
	steps     map[string]map[string][]byte // job id -> step name -> record
	workers   map[string][]byte
	workerIDs []string             // registration order
	claims    map[string][]stepKey // worker id -> steps it held, oldest first
	claimed   map[claimKey]bool    // the pairs in claims, for an O(1) held
	commits   int
	jobReads  int // Job and Steps calls
	before    func(*engine.Batch)
	failNext  error
}

type stepKey struct{ job, step string }

type claimKey struct {
	worker string
	stepKey
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{
		jobs:    map[string][]byte{},
		steps:   map[string]map[string][]byte{},
		workers: map[string][]byte{},
		claims:  map[string][]stepKey{},
		claimed: map[claimKey]bool{},
	}
}

// Commits counts the successful and failed Commit calls.
func (s *MemStore) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// JobReads counts the Job and Steps calls: what a test expects to stay
// put while the engine serves a live job from memory.
func (s *MemStore) JobReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobReads
}

// BeforeCommit sets a hook called at the start of every Commit, outside the
// store's lock (tests use it to hold a commit while commands queue up).
func (s *MemStore) BeforeCommit(f func(*engine.Batch)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.before = f
}

// FailNextCommit makes the next Commit fail with err, writing nothing.
func (s *MemStore) FailNextCommit(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext = err
}

// Commit writes a batch atomically.
func (s *MemStore) Commit(ctx context.Context, b *engine.Batch) error {
	s.mu.Lock()
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(b)
	}
	// Encode before taking the lock: a failed encoding writes nothing.
	jobs := make([][]byte, len(b.Jobs))
	for i, j := range b.Jobs {
		data, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		jobs[i] = data
	}
	steps := make([][]byte, len(b.Steps))
	for i, st := range b.Steps {
		data, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("encode step %s/%s: %w", st.JobID, st.Name, err)
		}
		steps[i] = data
	}
	workers := make([][]byte, len(b.Workers))
	for i, w := range b.Workers {
		data, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("encode worker %s: %w", w.ID, err)
		}
		workers[i] = data
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	if err := s.failNext; err != nil {
		s.failNext = nil
		return err
	}
	for i, j := range b.Jobs {
		if _, ok := s.jobs[j.ID]; !ok {
			s.jobOrder = append(s.jobOrder, j.ID)
		}
		s.jobs[j.ID] = jobs[i]
	}
	for i, st := range b.Steps {
		m, ok := s.steps[st.JobID]
		if !ok {
			m = map[string][]byte{}
			s.steps[st.JobID] = m
		}
		if st.WorkerID != nil && !s.held(*st.WorkerID, st.JobID, st.Name) {
			s.claims[*st.WorkerID] = append(s.claims[*st.WorkerID], stepKey{st.JobID, st.Name})
			s.claimed[claimKey{*st.WorkerID, stepKey{st.JobID, st.Name}}] = true
		}
		m[st.Name] = steps[i]
	}
	for i, w := range b.Workers {
		if _, ok := s.workers[w.ID]; !ok {
			s.workerIDs = append(s.workerIDs, w.ID)
		}
		s.workers[w.ID] = workers[i]
	}
	return nil
}

func (s *MemStore) held(workerID, jobID, step string) bool {
	return s.claimed[claimKey{workerID, stepKey{jobID, step}}]
}

// LoadActive returns every non-terminal job, and every terminal one with
// hooks pending, with its steps, and all workers.
func (s *MemStore) LoadActive(ctx context.Context) ([]*engine.Job, []*engine.Step, []*engine.Worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var jobs []*engine.Job
	var steps []*engine.Step
	for _, id := range s.jobOrder {
		j := decode[engine.Job](s.jobs[id])
		if j.Terminal() && !j.HooksPending {
			continue
		}
		jobs = append(jobs, j)
		steps = append(steps, s.stepsOf(id)...)
	}
	var workers []*engine.Worker
	for _, id := range s.workerIDs {
		workers = append(workers, decode[engine.Worker](s.workers[id]))
	}
	return jobs, steps, workers, nil
}

// Job returns a job (engine.ErrNotFound).
func (s *MemStore) Job(ctx context.Context, id string) (*engine.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobReads++
	data, ok := s.jobs[id]
	if !ok {
		return nil, engine.ErrNotFound
	}
	return decode[engine.Job](data), nil
}

// Steps returns a job's steps ordered by Seq.
func (s *MemStore) Steps(ctx context.Context, jobID string) ([]*engine.Step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.jobReads++
	return s.stepsOf(jobID), nil
}

func (s *MemStore) stepsOf(jobID string) []*engine.Step {
	var out []*engine.Step
	for _, data := range s.steps[jobID] {
		out = append(out, decode[engine.Step](data))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Jobs lists jobs newest first, filtered, with the total that matched.
func (s *MemStore) Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*engine.Job
	total, skip := 0, f.Offset
	for i := len(s.jobOrder) - 1; i >= 0; i-- {
		j := decode[engine.Job](s.jobs[s.jobOrder[i]])
		if f.Workspace != "" && j.Workspace != f.Workspace || f.TaskName != "" && j.TaskName != f.TaskName ||
			len(f.Statuses) > 0 && !slices.Contains(f.Statuses, j.Status) || f.SourceType != "" && j.SourceType != f.SourceType {
			continue
		}
		total++
		if c := f.Cursor; c != nil {
			if t := j.CreatedAt.UnixNano(); t > c.CreatedAt || t == c.CreatedAt && j.ID >= c.ID {
				continue // not older than the cursor
			}
		}
		if skip > 0 {
			skip--
			continue
		}
		if len(out) < f.Limit {
			out = append(out, j)
		}
	}
	return out, total, nil
}

// Worker returns a worker (engine.ErrNotFound).
func (s *MemStore) Worker(ctx context.Context, id string) (*engine.Worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.workers[id]
	if !ok {
		return nil, engine.ErrNotFound
	}
	return decode[engine.Worker](data), nil
}

// Workers lists workers in registration order with their total.
func (s *MemStore) Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*engine.Worker
	for i, id := range s.workerIDs {
		if i >= offset && len(out) < limit {
			out = append(out, decode[engine.Worker](s.workers[id]))
		}
	}
	return out, len(s.workerIDs), nil
}

// WorkerSteps returns the newest steps a worker held, at most limit, and their total.
func (s *MemStore) WorkerSteps(ctx context.Context, workerID string, limit int) ([]*engine.WorkerStep, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.claims[workerID]
	var out []*engine.WorkerStep
	for i := len(keys) - 1; i >= 0 && len(out) < limit; i-- {
		k := keys[i]
		st := decode[engine.Step](s.steps[k.job][k.step])
		j := decode[engine.Job](s.jobs[k.job])
		out = append(out, &engine.WorkerStep{
			JobID: j.ID, Workspace: j.Workspace, TaskName: j.TaskName, JobStatus: j.Status,
			StepName: st.Name, ActionType: st.ActionType, Status: st.Status,
			StartedAt: st.StartedAt, CompletedAt: st.CompletedAt, ErrorMessage: st.ErrorMessage,
		})
	}
	return out, len(keys), nil
}

func decode[T any](data []byte) *T {
	v := new(T)
	if err := json.Unmarshal(data, v); err != nil {
		// The store wrote these bytes itself from the same types.
		panic(fmt.Sprintf("enginetest: decode %T: %v", v, err))
	}
	return v
}

var _ engine.Store = (*MemStore)(nil)
