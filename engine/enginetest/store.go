package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/appliance-sh/appliance/audit"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// MemStore is a simple, real engine.Store held in maps. Records go in and
// out as JSON copies, as they would through a database, so the engine can
// never share memory with its readers.
type MemStore struct {
	mu        sync.Mutex
	jobs      map[string][]byte
	jobOrder  []string                     // by creation time, then id
	created   map[string]time.Time         // job id -> creation time, for jobOrder
	steps     map[string]map[string][]byte // job id -> step name -> record
	workers   map[string][]byte
	workerIDs []string             // by registration time, then id
	claims    map[string][]stepKey // worker id -> steps it holds, oldest claim first
	holders   map[stepKey]string   // step -> the worker in whose claims it is
	commits   int
	jobReads  int // Job and Steps calls
	before    func(*engine.Batch)
	failNext  error
	failWhen  func(*engine.Batch) error
	fires     map[fireKey]time.Time // trigger -> last fire
	audit     []audit.Entry         // the batches' audit entries, unsigned, in commit order
}

type fireKey struct{ ws, trigger string }

type stepKey struct{ job, step string }

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{
		jobs:    map[string][]byte{},
		created: map[string]time.Time{},
		steps:   map[string]map[string][]byte{},
		workers: map[string][]byte{},
		claims:  map[string][]stepKey{},
		holders: map[stepKey]string{},
		fires:   map[fireKey]time.Time{},
	}
}

// Commits counts the successful and failed Commit calls.
func (s *MemStore) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// Audit returns the audit entries the committed batches carried, in
// order (the memory store keeps them as given: it signs no chain).
func (s *MemStore) Audit() []audit.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.audit)
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

// FailCommitsWhen makes every Commit for which f returns an error fail
// with it, writing nothing (nil f stops failing): a crash between a
// decision and its commit, on demand.
func (s *MemStore) FailCommitsWhen(f func(*engine.Batch) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWhen = f
}

// LastFire returns when a trigger last fired, and false when it never has.
func (s *MemStore) LastFire(ws, trigger string) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.fires[fireKey{ws, trigger}]
	return t, ok, nil
}

// SetLastFire records when a trigger last fired.
func (s *MemStore) SetLastFire(ws, trigger string, t time.Time) error {
	if ws == "" || trigger == "" {
		return fmt.Errorf("trigger state needs a workspace and a trigger name, got %q and %q: %w", ws, trigger, engine.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fires[fireKey{ws, trigger}] = t.UTC()
	return nil
}

// encodedBatch is a batch in its stored form, taken from the engine's
// records when it hands the batch over (they change again right after).
type encodedBatch struct {
	jobs, steps, workers [][]byte
	fires                []engine.TriggerFire
	marks                []engine.EventMark
	audit                []audit.Entry
	// keys holds the records' keys only (IDs, a step's job, name and
	// holder): what the write needs unless a hook wants the records.
	keys *engine.Batch
}

// PrepareCommit encodes the batch (engine.PreparingStore); the write
// stores it.
func (s *MemStore) PrepareCommit(b *engine.Batch) (func(context.Context) error, error) {
	eb := &encodedBatch{fires: slices.Clone(b.Fires), marks: slices.Clone(b.EventMarks), audit: slices.Clone(b.Audit)}
	var err error
	if eb.jobs, err = encodeAll(b.Jobs); err != nil {
		return nil, err
	}
	if eb.steps, err = encodeAll(b.Steps); err != nil {
		return nil, err
	}
	if eb.workers, err = encodeAll(b.Workers); err != nil {
		return nil, err
	}
	eb.keys = &engine.Batch{Fires: eb.fires, EventMarks: eb.marks}
	for _, j := range b.Jobs {
		eb.keys.Jobs = append(eb.keys.Jobs, &engine.Job{ID: j.ID, CreatedAt: j.CreatedAt})
	}
	for _, st := range b.Steps {
		k := &engine.Step{JobID: st.JobID, Name: st.Name}
		if st.WorkerID != nil {
			id := *st.WorkerID
			k.WorkerID = &id
		}
		eb.keys.Steps = append(eb.keys.Steps, k)
	}
	for _, w := range b.Workers {
		eb.keys.Workers = append(eb.keys.Workers, &engine.Worker{ID: w.ID})
	}
	return func(ctx context.Context) error { return s.write(eb) }, nil
}

func encodeAll[T any](recs []*T) ([][]byte, error) {
	out := make([][]byte, len(recs))
	for i, r := range recs {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", r, err)
		}
		out[i] = data
	}
	return out, nil
}

func decodeAll[T any](data [][]byte) []*T {
	out := make([]*T, len(data))
	for i, d := range data {
		out[i] = decode[T](d)
	}
	return out
}

// Commit writes a batch atomically.
func (s *MemStore) Commit(ctx context.Context, b *engine.Batch) error {
	write, err := s.PrepareCommit(b)
	if err != nil {
		return err
	}
	return write(ctx)
}

// write stores an encoded batch atomically; the hooks see a copy of it.
func (s *MemStore) write(eb *encodedBatch) error {
	jobs, steps, workers := eb.jobs, eb.steps, eb.workers
	s.mu.Lock()
	before, failWhen := s.before, s.failWhen
	s.mu.Unlock()
	b := eb.keys
	if before != nil || failWhen != nil {
		b = &engine.Batch{Jobs: decodeAll[engine.Job](eb.jobs), Steps: decodeAll[engine.Step](eb.steps),
			Workers: decodeAll[engine.Worker](eb.workers), Fires: eb.fires, EventMarks: eb.marks}
	}
	if before != nil {
		before(b)
	}
	for _, f := range b.Fires {
		if f.Workspace == "" || f.Trigger == "" {
			return fmt.Errorf("trigger state needs a workspace and a trigger name, got %q and %q: %w", f.Workspace, f.Trigger, engine.ErrInvalid)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits++
	if err := s.failNext; err != nil {
		s.failNext = nil
		return err
	}
	if failWhen != nil {
		if err := failWhen(b); err != nil {
			return err
		}
	}
	for _, f := range b.Fires {
		s.fires[fireKey{f.Workspace, f.Trigger}] = f.At.UTC()
	}
	s.audit = append(s.audit, eb.audit...)
	for i, j := range b.Jobs {
		if _, ok := s.jobs[j.ID]; !ok {
			s.jobs[j.ID] = jobs[i]
			s.created[j.ID] = j.CreatedAt
			s.jobOrder = s.insertSorted(s.jobOrder, j.ID, func(id string) (time.Time, string) {
				return s.created[id], id
			})
		}
		s.jobs[j.ID] = jobs[i]
	}
	for i, st := range b.Steps {
		m, ok := s.steps[st.JobID]
		if !ok {
			m = map[string][]byte{}
			s.steps[st.JobID] = m
		}
		if st.WorkerID != nil {
			s.hold(*st.WorkerID, stepKey{st.JobID, st.Name})
		}
		m[st.Name] = steps[i]
	}
	for i, w := range b.Workers {
		if _, ok := s.workers[w.ID]; !ok {
			s.workers[w.ID] = workers[i]
			s.workerIDs = s.insertSorted(s.workerIDs, w.ID, func(id string) (time.Time, string) {
				return decode[engine.Worker](s.workers[id]).RegisteredAt, id
			})
		}
		s.workers[w.ID] = workers[i]
	}
	return nil
}

// insertSorted adds id to ids kept in (time, id) order, as the bbolt
// store's time-keyed indexes keep them.
func (s *MemStore) insertSorted(ids []string, id string, key func(string) (time.Time, string)) []string {
	t, _ := key(id)
	i := sort.Search(len(ids), func(i int) bool {
		ti, idi := key(ids[i])
		return ti.After(t) || ti.Equal(t) && idi > id
	})
	return slices.Insert(ids, i, id)
}

// hold lists a step in its holder's claims; a step claimed again by
// another worker (after recovery) moves to the new holder's list.
func (s *MemStore) hold(workerID string, k stepKey) {
	prev, ok := s.holders[k]
	if ok && prev == workerID {
		return
	}
	if ok {
		s.claims[prev] = slices.DeleteFunc(s.claims[prev], func(c stepKey) bool { return c == k })
	}
	s.holders[k] = workerID
	s.claims[workerID] = append(s.claims[workerID], k)
}

// defaultLimit is the page size when a list asks for none (limit <= 0).
const defaultLimit = 50

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
	if f.TaskName != "" && f.Workspace == "" {
		return nil, 0, fmt.Errorf("list jobs: task filter %q needs a workspace: %w", f.TaskName, engine.ErrInvalid)
	}
	if f.Offset < 0 {
		return nil, 0, fmt.Errorf("list jobs: negative offset %d: %w", f.Offset, engine.ErrInvalid)
	}
	if f.Limit <= 0 {
		f.Limit = defaultLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*engine.Job
	total, skip := 0, f.Offset
	for i := len(s.jobOrder) - 1; i >= 0; i-- {
		j := decode[engine.Job](s.jobs[s.jobOrder[i]])
		if f.Workspace != "" && j.Workspace != f.Workspace || f.TaskName != "" && j.TaskName != f.TaskName ||
			len(f.Statuses) > 0 && !slices.Contains(f.Statuses, j.Status) || f.SourceType != "" && j.SourceType != f.SourceType ||
			f.Visible != nil && !f.Visible(j.Workspace, j.AccessPath) {
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
	if offset < 0 {
		return nil, 0, fmt.Errorf("list workers: negative offset %d: %w", offset, engine.ErrInvalid)
	}
	if limit <= 0 {
		limit = defaultLimit
	}
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
	if limit <= 0 {
		limit = defaultLimit
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := s.claims[workerID]
	var out []*engine.WorkerStep
	for i := len(keys) - 1; i >= 0 && len(out) < limit; i-- {
		k := keys[i]
		st := decode[engine.Step](s.steps[k.job][k.step])
		j := decode[engine.Job](s.jobs[k.job])
		out = append(out, &engine.WorkerStep{
			JobID: j.ID, Workspace: j.Workspace, TaskName: j.TaskName, AccessPath: j.AccessPath, JobStatus: j.Status,
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
