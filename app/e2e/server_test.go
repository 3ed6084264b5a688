package e2e

import (
	"context"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners/worker"
)

// testServer is a running server (app.Start) with the parts of it the
// tests look into (app.Internals).
type testServer struct {
	*app.Server
	cfg                *config.Server
	engine             *engine.Engine
	db                 app.StateStore
	logs               app.LogStore
	workerTags         []string
	stopOrchestrator   func()
	sweepRevisions     func(ctx context.Context, now time.Time, grace time.Duration) (int, error)
	revisionSweepGrace time.Duration
	inProcessTransport func(claimWait time.Duration) worker.Server
}

// startServer starts a server as `appliance serve` does.
func startServer(ctx context.Context, cfg *config.Server, log *slog.Logger) (*testServer, error) {
	srv, err := app.Start(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	in := srv.Internals()
	return &testServer{
		Server: srv, cfg: in.Config, engine: in.Engine, db: in.DB, logs: in.Logs, workerTags: in.WorkerTags,
		stopOrchestrator: in.StopOrchestrator, sweepRevisions: in.SweepRevisions,
		revisionSweepGrace: in.RevisionSweepGrace, inProcessTransport: in.InProcessTransport,
	}, nil
}
