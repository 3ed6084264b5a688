// Package scheduler fires cron triggers: it keeps each enabled trigger's
// next fire time (engine/cron) and starts its job in the engine when due.
// A client of the engine beside it: it must not import net/http, echo,
// bbolt, store, api or runners.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/cron"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// Workspaces is the loaded workspaces; *workspace.Registry implements it.
type Workspaces interface {
	List() []workspace.Status
	// Changed returns a channel closed at the next change of any workspace.
	Changed() <-chan struct{}
}

// Jobs creates the jobs triggers fire; *engine.Engine implements it. The
// request carries the fire (engine.CreateJob.Fire): the job and the record
// of its fire are one commit, so a crash never leaves one without the other.
type Jobs interface {
	CreateTriggered(ctx context.Context, req engine.CreateJob, concurrency string) (*engine.Job, error)
}

// State reads each trigger's last fire time; *store.DB implements it. A
// fire is recorded by Jobs with its job; SetLastFire is only for the
// scheduler's own bookkeeping: it records the time it starts scheduling
// a new or changed trigger: that is the point its next fire is computed
// from, so a fire missed while the server is down is found at start-up
// even for a trigger that never fired before.
type State interface {
	LastFire(ws, trigger string) (time.Time, bool, error)
	SetLastFire(ws, trigger string, t time.Time) error
}

// Config wires a Scheduler.
type Config struct {
	Workspaces Workspaces
	Jobs       Jobs
	State      State
	Clock      Clock        // nil = RealClock
	Logger     *slog.Logger // nil = slog.Default()
	// Late, if set, is told how late each fire is against its slot (for
	// metrics; a fire caught up after downtime is as late as the downtime).
	Late func(time.Duration)
}

// Scheduler fires the enabled scheduler triggers of every workspace's
// current revision. It sleeps on one timer until the earliest fire time,
// and a workspace change wakes it.
type Scheduler struct {
	cfg     Config
	clock   Clock
	log     *slog.Logger
	entries map[key]*entry // owned by Run
}

type key struct{ ws, name string }

// entry is one scheduled trigger: its current definition and next fire.
type entry struct {
	key     key
	trigger *workflow.Trigger
	next    time.Time
}

// New returns a scheduler; call Run to start it.
func New(cfg Config) *Scheduler {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{cfg: cfg, clock: cfg.Clock, log: cfg.Logger, entries: map[key]*entry{}}
}

// Run schedules the triggers and fires them until ctx ends.
//
// At start-up a trigger's next fire is computed after its persisted last
// fire, so one that fell due while the server was down fires at once, and
// only once however many times it was due. A trigger added or changed
// (cron or timezone) by a hot reload is scheduled from now; an unchanged one
// keeps its next fire time; a removed or disabled one is dropped.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.cfg.Workspaces == nil || s.cfg.Jobs == nil || s.cfg.State == nil {
		return errors.New("scheduler: workspaces, jobs and state are required")
	}
	// Taken before the first List, so no change can slip between them.
	changed := s.cfg.Workspaces.Changed()
	s.sync(true)
	for {
		var timer Timer
		var fire <-chan time.Time
		if e := s.earliest(); e != nil {
			timer = s.clock.NewTimer(e.next.Sub(s.clock.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-changed:
			changed = s.cfg.Workspaces.Changed()
			s.sync(false)
		case <-fire:
			s.fireDue(ctx)
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// sync brings the entries in line with the workspaces' current revisions.
func (s *Scheduler) sync(startup bool) {
	now := s.clock.Now()
	seen := map[key]bool{}
	for _, st := range s.cfg.Workspaces.List() {
		if st.Workspace == nil {
			continue
		}
		for name, t := range st.Workspace.Triggers {
			if t == nil || t.Type != workflow.TriggerScheduler || !t.Enabled {
				continue
			}
			k := key{st.Name, name}
			seen[k] = true
			if e, ok := s.entries[k]; ok && e.trigger.Cron == t.Cron && e.trigger.Timezone == t.Timezone {
				e.trigger = t // task, input or concurrency may have changed
				continue
			}
			s.schedule(k, t, now, startup)
		}
	}
	for k := range s.entries {
		if !seen[k] {
			delete(s.entries, k)
			s.log.Info("trigger unscheduled", "workspace", k.ws, "trigger", k.name)
		}
	}
}

// schedule computes a new or changed trigger's next fire: after its
// persisted last fire at start-up, else after now (recorded as its base).
func (s *Scheduler) schedule(k key, t *workflow.Trigger, now time.Time, startup bool) {
	base, known := time.Time{}, false
	if startup {
		last, ok, err := s.cfg.State.LastFire(k.ws, k.name)
		if err != nil {
			s.log.Error("read trigger's last fire; scheduling it from now", "workspace", k.ws, "trigger", k.name, "err", err)
		}
		base, known = last, ok && err == nil
	}
	if !known {
		base = now
		s.record(k, now)
	}
	next, err := nextAfter(t, base)
	if err != nil {
		delete(s.entries, k)
		s.log.Error("trigger not scheduled", "workspace", k.ws, "trigger", k.name, "err", err)
		return
	}
	s.entries[k] = &entry{key: k, trigger: t, next: next}
	s.log.Info("trigger scheduled", "workspace", k.ws, "trigger", k.name, "cron", t.Cron, "timezone", t.Timezone, "next", next)
}

func (s *Scheduler) earliest() *entry {
	var first *entry
	for _, e := range s.entries {
		if first == nil || e.next.Before(first.next) || (e.next.Equal(first.next) && less(e.key, first.key)) {
			first = e
		}
	}
	return first
}

// fireDue fires every trigger whose time has come, earliest first.
func (s *Scheduler) fireDue(ctx context.Context) {
	now := s.clock.Now()
	var due []*entry
	for _, e := range s.entries {
		if !e.next.After(now) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool {
		if !due[i].next.Equal(due[j].next) {
			return due[i].next.Before(due[j].next)
		}
		return less(due[i].key, due[j].key)
	})
	for _, e := range due {
		if ctx.Err() != nil {
			return
		}
		s.fire(ctx, e, now)
	}
}

// fire creates the trigger's job and records the fire in the same commit,
// then computes the next.
// The fire time is the later of the slot and now: a late fire (after
// downtime) counts for every slot it missed, and a timer that woke early by
// the wall clock can never fire the same slot twice.
func (s *Scheduler) fire(ctx context.Context, e *entry, now time.Time) {
	at := e.next
	if now.After(at) {
		at = now
	}
	if s.cfg.Late != nil {
		s.cfg.Late(at.Sub(e.next))
	}
	t, k := e.trigger, e.key
	source := k.ws + "/" + k.name
	job, err := s.cfg.Jobs.CreateTriggered(ctx, engine.CreateJob{
		Workspace:  k.ws,
		Task:       t.Task,
		Input:      t.Input,
		SourceType: engine.SourceTrigger,
		SourceID:   &source,
		Fire:       &engine.TriggerFire{Workspace: k.ws, Trigger: k.name, At: at},
	}, t.Concurrency)
	switch {
	case err != nil && ctx.Err() != nil:
		return // shutting down: unrecorded, so it fires again at start-up
	case err != nil:
		// Neither the job nor the fire was committed (a restart fires it
		// once), but the schedule moves on rather than retrying in a loop.
		s.log.Error("trigger fired but its job was not created", "workspace", k.ws, "trigger", k.name, "task", t.Task, "err", err)
	default:
		s.log.Info("trigger fired", "workspace", k.ws, "trigger", k.name, "job", job.ID, "status", job.Status)
	}
	next, err := nextAfter(t, at)
	if err != nil {
		delete(s.entries, k)
		s.log.Error("trigger has no further fire time", "workspace", k.ws, "trigger", k.name, "err", err)
		return
	}
	e.next = next
}

func (s *Scheduler) record(k key, at time.Time) {
	if err := s.cfg.State.SetLastFire(k.ws, k.name, at); err != nil {
		s.log.Error("record trigger's last fire", "workspace", k.ws, "trigger", k.name, "err", err)
	}
}

func nextAfter(t *workflow.Trigger, after time.Time) (time.Time, error) {
	runs, err := cron.NextRuns(t.Cron, t.Timezone, after, 1)
	if err != nil {
		return time.Time{}, err
	}
	if len(runs) == 0 {
		return time.Time{}, fmt.Errorf("cron %q: no fire time after %s", t.Cron, after.Format(time.RFC3339))
	}
	return runs[0], nil
}

func less(a, b key) bool {
	if a.ws != b.ws {
		return a.ws < b.ws
	}
	return a.name < b.name
}
