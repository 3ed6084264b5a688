package app

import (
	"context"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners/worker"
)

// Internals are the parts of a running server the system tests (app/e2e)
// look into or act on directly; nothing else may use them.
type Internals struct {
	Config     *config.Server
	Engine     *engine.Engine
	DB         StateStore
	Logs       LogStore
	WorkerTags []string // the in-process workers' tags
	// StopOrchestrator stops the engine's loop, as its failure would.
	StopOrchestrator func()
	// SweepRevisions deletes the revision snapshots no job needs that have
	// been unused for grace; RevisionSweepGrace is the server's own grace.
	SweepRevisions     func(ctx context.Context, now time.Time, grace time.Duration) (int, error)
	RevisionSweepGrace time.Duration
	// InProcessTransport is a new in-process transport to the server's
	// worker protocol service, as the in-process pool uses; its claims
	// long-poll for claimWait (the pool's own when 0).
	InProcessTransport func(claimWait time.Duration) worker.Server
}

// Internals returns the server's parts for the system tests.
func (s *Server) Internals() Internals {
	return Internals{
		Config:             s.cfg,
		Engine:             s.current.p.Load(),
		DB:                 s.storage.state,
		Logs:               s.storage.logs,
		WorkerTags:         s.workerTags,
		StopOrchestrator:   func() { s.currentTerm().orchestrator.stop() },
		SweepRevisions:     s.revisions.sweep,
		RevisionSweepGrace: revisionSweepGrace,
		InProcessTransport: func(claimWait time.Duration) worker.Server {
			t := newInProcessServer(s.protocol, nil)
			if claimWait > 0 {
				t.claimWait = claimWait
			}
			return t
		},
	}
}
