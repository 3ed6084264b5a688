package app

import (
	"context"

	"github.com/appliance-sh/appliance/app/eventsources"
	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners/worker"
	"github.com/appliance-sh/appliance/store"
)

// term is the leader's part of a server: the engine with its state
// loaded, and what decides and runs (orchestrator, scheduler, event
// sources, retention sweepers, in-process workers). A lone server has
// one term from start to shutdown; a replica of a pair one per stretch
// of leading, each loading the state afresh, as a restart does.
type term struct {
	eng *engine.Engine
	sup *supervisor
	// epoch is the lease's epoch a replica leads at (0 on a lone server);
	// ended is closed when a replica's term ends (nil on a lone server).
	epoch int64
	ended chan struct{}
	// consumers is the event sources' supervisor, for the API's triggers
	// list.
	consumers *eventsources.Supervisor

	orchestrator, scheduler, eventSources, sweeper, revisionSweeper *component
	workers, consumerWorkers                                        *component // nil without in-process workers
}

// loadTerm builds an engine and loads the state into it. Loaded here,
// not in Run: a store that cannot be loaded (a corrupt record) stops
// start-up with the record named, instead of leaving a server that
// answers but refuses every job. Loading recovers what the last leader
// left: steps its in-process workers held are lost (retries apply).
func (s *Server) loadTerm(ctx context.Context) (*term, error) {
	cfg := s.cfg
	eng, err := engine.New(engine.Config{
		Store:            s.storage.state,
		Workspaces:       s.revisions, // the registry's, and older revisions from their snapshots
		Logs:             s.sink,
		Logger:           s.log,
		HeartbeatTimeout: cfg.Effective.HeartbeatTimeout,
		TemplateTime:     cfg.Effective.Limits.TemplateTime,
		TemplateOutput:   cfg.Effective.Limits.TemplateOutput,
		Metrics:          s.metrics,
		Agents:           s.agents,
		RunnerTag:        runnerTags.CapabilityTag,
		Clock:            cfg.Test.EngineClock,
		Queues:           cfg.QueueLimits(),
		Audit:            s.trail.queue,
	})
	if err != nil {
		return nil, err
	}
	if err := eng.Load(ctx); err != nil {
		return nil, err
	}
	return &term{eng: eng}, nil
}

// startTerm starts t's components under sup and makes its engine the one
// the API and the worker service call.
func (s *Server) startTerm(t *term, sup *supervisor) {
	cfg, log, eng := s.cfg, s.log, t.eng
	t.sup = sup
	t.consumers = eventsources.New(eventsources.Config{Workspaces: s.registry, Jobs: eng, Clock: scheduler.RealClock{},
		Logger: log.With("component", "event sources")})
	// Calls made before the loop runs wait for it.
	s.termMu.Lock()
	s.term = t
	s.termMu.Unlock()
	s.current.set(eng)

	t.orchestrator = sup.start("orchestrator", eng.Run)
	sched := scheduler.New(scheduler.Config{Workspaces: s.registry, Jobs: eng, State: s.storage.state, Clock: scheduler.RealClock{},
		Logger: log.With("component", "scheduler"), Late: s.metrics.SchedulerLate})
	t.scheduler = sup.start("scheduler", sched.Run)
	if !cfg.Test.NoEventSources {
		t.eventSources = sup.start("event sources", t.consumers.Run)
	}
	// Ended jobs are no longer the orchestrator's, so the sweeper deletes
	// them through the store, between its commits.
	sweeper := s.storage.newSweeper(store.SweeperConfig{Retention: cfg.Effective.Retention,
		Archive: s.archive, ArchivePending: s.metrics.LogArchivePending,
		Interval: cfg.Test.SweepInterval, Logger: log.With("component", "retention")})
	t.sweeper = sup.start("retention sweeper", sweeper.Run)
	t.revisionSweeper = sup.start("revision sweeper", s.revisions.run)

	if *cfg.Workers == 0 {
		return
	}
	inProcess := newInProcessServer(s.protocol, s.registry)
	inProcess.files = s.revisions.files
	inProcess.registered = func() { s.ready.done(inProcessPart) }
	if s.consumerSlots > 0 {
		inProcess.kind = engine.JobSteps
	}
	inProcessWorkers := worker.New(inProcess, s.pool, log.With("worker", "in-process"))
	t.workers = sup.start("in-process workers", inProcessWorkers.Run)

	if s.consumerSlots > 0 {
		consumerPool := s.pool
		consumerPool.Name = s.pool.Name + "-consumers"
		consumerPool.MaxConcurrent = s.consumerSlots
		consumerServer := newInProcessServer(s.protocol, s.registry)
		consumerServer.files = s.revisions.files
		consumerServer.kind = engine.ConsumerStepsOnly
		consumerWorkers := worker.New(consumerServer, consumerPool, log.With("worker", "in-process consumers"))
		t.consumerWorkers = sup.start("in-process event-source consumers", consumerWorkers.Run)
	}
}

// currentTerm is the term running now (nil: none, a follower).
func (s *Server) currentTerm() *term {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	return s.term
}

// stopWork stops what decides and runs, the triggers first so none fires
// into an orchestrator stopping, and leaves the orchestrator running. With
// a cause (worker.ErrStopNow) the in-process workers kill their steps at
// once instead of letting them finish.
func (t *term) stopWork(cause error) {
	t.scheduler.stop()
	t.eventSources.stop()
	t.sweeper.stop()
	t.revisionSweeper.stop()
	t.workers.stopWith(cause)
	t.consumerWorkers.stopWith(cause)
}

// currentEventSources is the API's view of the event sources: the
// current term's supervisor's.
type currentEventSources struct{ s *Server }

func (c currentEventSources) Status(ws, trigger string) (engine.ConsumerStatus, bool) {
	if t := c.s.currentTerm(); t != nil {
		return t.consumers.Status(ws, trigger)
	}
	return engine.ConsumerStatus{}, false
}

func (c currentEventSources) Running() bool {
	t := c.s.currentTerm()
	return t != nil && t.consumers.Running()
}
