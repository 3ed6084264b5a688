// Package eventsources runs the event sources: one consumer job per enabled
// event_source trigger, restarted by its restart policy with exponential
// backoff, replaced when a hot reload changes the trigger, cancelled when it
// disables or removes it. The consumer's events become jobs in the engine
// (engine.Emit); this package only keeps the consumers alive.
// A client of the engine beside it: it must not import net/http, echo,
// bbolt, store, api or runners.
package eventsources

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// Restart policies.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on_failure"
	RestartNever     = "never"
)

const (
	// DefaultBackoff is the first restart delay when backoff_secs is unset.
	DefaultBackoff = 5 * time.Second
	// MaxBackoff caps the doubling restart delay.
	MaxBackoff = 5 * time.Minute
	// ResetAfter is how long a consumer must run for the delay to start
	// again from backoff_secs.
	ResetAfter = 60 * time.Second
)

// errReplaced stops a consumer whose trigger changed, was disabled or
// removed (rather than the server stopping).
var errReplaced = errors.New("event source trigger changed, disabled or removed")

// Workspaces is the loaded workspaces; *workspace.Registry implements it.
type Workspaces interface {
	List() []workspace.Status
	// Changed returns a channel closed at the next change of any workspace.
	Changed() <-chan struct{}
}

// Jobs is the part of the engine consumers need; *engine.Engine implements it.
type Jobs interface {
	CreateTriggered(ctx context.Context, req engine.CreateJob, concurrency string) (*engine.Job, error)
	CancelJob(ctx context.Context, jobID string) error
	JobDone(ctx context.Context, jobID string) (<-chan struct{}, error)
	Job(ctx context.Context, id string) (*engine.Job, []*engine.Step, error)
	LiveFromSource(ctx context.Context, sourceType, sourceID string) ([]*engine.Job, error)
}

// Config wires a Supervisor.
type Config struct {
	Workspaces Workspaces
	Jobs       Jobs
	Clock      scheduler.Clock // nil = scheduler.RealClock
	Logger     *slog.Logger    // nil = slog.Default()
}

// Supervisor keeps one consumer job running per enabled event source.
type Supervisor struct {
	cfg   Config
	clock scheduler.Clock
	log   *slog.Logger

	mu      sync.Mutex
	status  map[key]*engine.ConsumerStatus
	running bool // Run has begun (see Running)

	consumers map[key]*consumer // owned by Run
	wg        sync.WaitGroup
}

type key struct{ ws, name string }

// consumer is the goroutine keeping one trigger's consumer job alive.
type consumer struct {
	key     key
	trigger *workflow.Trigger
	print   string // the trigger's definition: a change replaces the consumer
	stop    context.CancelCauseFunc
	done    chan struct{}
}

// New returns a supervisor; call Run to start it.
func New(cfg Config) *Supervisor {
	if cfg.Clock == nil {
		cfg.Clock = scheduler.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Supervisor{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, status: map[key]*engine.ConsumerStatus{}, consumers: map[key]*consumer{}}
}

// Status returns the consumer of a workspace's event source, false when it
// is not one the supervisor knows (yet: an enabled one is then starting,
// if the supervisor runs).
func (s *Supervisor) Status(ws, trigger string) (engine.ConsumerStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[key{ws, trigger}]
	if !ok {
		return engine.ConsumerStatus{}, false
	}
	return *st, true
}

// Running reports whether Run has begun: an enabled event source it does
// not know yet is about to be taken up.
func (s *Supervisor) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Run starts the consumers (adopting those still live from before a
// restart) and follows hot reloads until ctx ends. Consumer jobs are not
// cancelled when ctx ends: the next start adopts them.
func (s *Supervisor) Run(ctx context.Context) error {
	if s.cfg.Workspaces == nil || s.cfg.Jobs == nil {
		return errors.New("event sources: workspaces and jobs are required")
	}
	s.mu.Lock()
	s.running = true
	s.mu.Unlock()
	changed := s.cfg.Workspaces.Changed()
	s.sync(ctx)
	for {
		select {
		case <-ctx.Done():
			s.wg.Wait()
			return nil
		case <-changed:
			changed = s.cfg.Workspaces.Changed()
			s.sync(ctx)
		}
	}
}

// sync brings the consumers in line with the current revisions.
func (s *Supervisor) sync(ctx context.Context) {
	want := map[key]*workflow.Trigger{}
	exists := map[key]bool{} // disabled ones too
	for _, st := range s.cfg.Workspaces.List() {
		if st.Workspace == nil {
			continue
		}
		for name, t := range st.Workspace.Triggers {
			if t == nil || t.Type != workflow.TriggerEventSource {
				continue
			}
			exists[key{st.Name, name}] = true
			if t.Enabled {
				want[key{st.Name, name}] = t
			}
		}
	}
	keys := make([]key, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ws+"/"+keys[i].name < keys[j].ws+"/"+keys[j].name })
	for k, c := range s.consumers {
		t, ok := want[k]
		if ok && fingerprint(t) == c.print {
			continue
		}
		// Changed, disabled or removed: its consumer job is cancelled
		// before a new one may start, so two never run at once.
		c.stop(errReplaced)
		<-c.done
		delete(s.consumers, k)
		s.mu.Lock()
		s.status[k].State = engine.ConsumerStopped
		s.mu.Unlock()
		s.log.Info("event source consumer stopped", "workspace", k.ws, "trigger", k.name, "reason", map[bool]string{true: "trigger changed", false: "trigger disabled or removed"}[ok])
	}
	for _, k := range keys {
		if _, ok := s.consumers[k]; ok {
			continue
		}
		t := want[k]
		cctx, stop := context.WithCancelCause(ctx)
		c := &consumer{key: k, trigger: t, print: fingerprint(t), stop: stop, done: make(chan struct{})}
		s.consumers[k] = c
		s.mu.Lock()
		s.status[k] = &engine.ConsumerStatus{State: engine.ConsumerRunning}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(c.done)
			s.run(cctx, c)
		}()
	}
	// A disabled trigger shows as stopped (with its last consumer, if
	// any); a removed one is forgotten.
	s.mu.Lock()
	for k := range exists {
		if _, ok := s.status[k]; !ok {
			s.status[k] = &engine.ConsumerStatus{State: engine.ConsumerStopped}
		}
	}
	for k := range s.status {
		if !exists[k] {
			delete(s.status, k)
		}
	}
	s.mu.Unlock()
}

func fingerprint(t *workflow.Trigger) string {
	b, _ := json.Marshal(t)
	return string(b)
}

func (s *Supervisor) set(k key, f func(*engine.ConsumerStatus)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.status[k]; ok {
		f(st)
	}
}

// run keeps one consumer job alive until ctx ends (the trigger changed,
// was disabled or removed: the job is cancelled) or the restart policy
// says no more.
func (s *Supervisor) run(ctx context.Context, c *consumer) {
	t, k := c.trigger, c.key
	source := k.ws + "/" + k.name
	log := s.log.With("workspace", k.ws, "trigger", k.name)
	base := time.Duration(t.BackoffSecs) * time.Second
	if base <= 0 {
		base = DefaultBackoff
	}
	delay := base
	jobID := s.adopt(ctx, source, t.Task, log)
	restarting := false // the next job started is a restart
	for ctx.Err() == nil {
		started := s.clock.Now()
		if jobID == "" {
			j, err := s.cfg.Jobs.CreateTriggered(ctx, engine.CreateJob{Workspace: k.ws, Task: t.Task,
				SourceType: engine.SourceTrigger, SourceID: &source}, engine.ConcurrencyAllow)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				log.Error("event source consumer not started; retrying after backoff", "err", err, "delay", delay)
				s.set(k, func(st *engine.ConsumerStatus) { st.State = engine.ConsumerBackoff })
				if !s.sleep(ctx, delay) {
					break
				}
				delay = min(delay*2, MaxBackoff)
				continue
			}
			jobID = j.ID
			log.Info("event source consumer started", "job_id", jobID)
		}
		id, again := jobID, restarting
		restarting = false
		s.set(k, func(st *engine.ConsumerStatus) {
			st.ConsumerJobID, st.State = id, engine.ConsumerRunning
			if again {
				st.Restarts++
			}
		})
		status, ok := s.wait(ctx, jobID)
		if !ok {
			if !errors.Is(context.Cause(ctx), errReplaced) {
				break // shutdown: the next start adopts the job
			}
			// Stopped by a hot reload: the consumer job goes too.
			if err := s.cfg.Jobs.CancelJob(context.WithoutCancel(ctx), jobID); err != nil && !errors.Is(err, engine.ErrConflict) {
				log.Warn("cancel event source consumer", "job_id", jobID, "err", err)
			}
			break
		}
		restart := t.RestartPolicy == "" || t.RestartPolicy == RestartAlways ||
			t.RestartPolicy == RestartOnFailure && status == engine.JobFailed
		if !restart {
			log.Info("event source consumer ended; not restarted", "job_id", jobID, "status", status, "restart_policy", t.RestartPolicy)
			s.set(k, func(st *engine.ConsumerStatus) { st.State = engine.ConsumerStopped })
			return
		}
		if s.clock.Now().Sub(started) >= ResetAfter {
			delay = base
		}
		log.Info("event source consumer ended; restarting after backoff", "job_id", jobID, "status", status, "delay", delay)
		s.set(k, func(st *engine.ConsumerStatus) { st.State = engine.ConsumerBackoff })
		if !s.sleep(ctx, delay) {
			break
		}
		delay = min(delay*2, MaxBackoff)
		jobID, restarting = "", true
	}
	s.set(k, func(st *engine.ConsumerStatus) { st.State = engine.ConsumerStopped })
}

// adopt finds the trigger's consumer job still live from before (a server
// restart, say): the newest is kept, any other cancelled.
func (s *Supervisor) adopt(ctx context.Context, source, task string, log *slog.Logger) string {
	live, err := s.cfg.Jobs.LiveFromSource(ctx, engine.SourceTrigger, source)
	if err != nil {
		log.Warn("look for a live event source consumer", "err", err)
		return ""
	}
	var keep *engine.Job
	for _, j := range live {
		if j.TaskName != task {
			continue // a target job
		}
		if keep == nil || j.CreatedAt.After(keep.CreatedAt) {
			if keep != nil {
				_ = s.cfg.Jobs.CancelJob(ctx, keep.ID)
			}
			keep = j
			continue
		}
		_ = s.cfg.Jobs.CancelJob(ctx, j.ID)
	}
	if keep == nil {
		return ""
	}
	log.Info("event source consumer adopted", "job_id", keep.ID)
	return keep.ID
}

// wait waits for the job to end and returns its status; false when ctx
// ended first.
func (s *Supervisor) wait(ctx context.Context, jobID string) (string, bool) {
	done, err := s.cfg.Jobs.JobDone(ctx, jobID)
	if err != nil {
		if ctx.Err() != nil {
			return "", false
		}
		return engine.JobFailed, true
	}
	select {
	case <-done:
	case <-ctx.Done():
		return "", false
	}
	j, _, err := s.cfg.Jobs.Job(ctx, jobID)
	if err != nil {
		if ctx.Err() != nil {
			return "", false
		}
		return engine.JobFailed, true
	}
	return j.Status, true
}

func (s *Supervisor) sleep(ctx context.Context, d time.Duration) bool {
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
