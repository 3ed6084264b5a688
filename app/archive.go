package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// archiveDrainTimeout bounds how long shutdown waits for pending log
// uploads; what is left is logged and stays in the local JSONL files.
const archiveDrainTimeout = 30 * time.Second

// serverLogs is the log store the server hands to the engine and the API:
// *store.Logs, or *store.ArchivingLogs when logs are archived.
type serverLogs interface {
	engine.LogSink
	engine.StepLogEnder
	engine.RunLogSink
	api.LogStore
}

// openArchive wraps the storage's logs with the configured archive;
// without one it returns the logs themselves and a nil archiver.
func openArchive(cfg config.LogStorage, st *storage, log *slog.Logger) (serverLogs, *store.ArchivingLogs, error) {
	a, key, err := cfg.EffectiveArchive()
	if err != nil || a == nil {
		return st.logs, nil, err
	}
	backend, err := store.NewArchive(store.ArchiveConfig{Type: a.Type, Bucket: a.Bucket, Region: a.Region, Endpoint: a.Endpoint, Path: a.Path})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	archiving := store.NewArchivingLogs(st.logs, backend, st.state, store.ArchiveOptions{
		Prefix: a.Prefix,
		Logger: log.With("component", "log-archive"),
	})
	return archiving, archiving, nil
}

// drainArchive waits, within archiveDrainTimeout, for the uploads queued
// before shutdown.
func (s *Server) drainArchive() error {
	if s.archive == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveDrainTimeout)
	defer cancel()
	return s.archive.Drain(ctx)
}
