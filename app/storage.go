package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/postgres"
)

// StateStore is what the server keeps its records in: the engine's jobs,
// steps and workers (with the optional ports the engine looks for, required
// here so a store lacking one fails to build instead of quietly losing
// event marks or big-job pages), the triggers' last fires, the health
// check's write and the retention's deletes. bbolt's *store.DB and
// PostgreSQL's *postgres.DB both are one.
type StateStore interface {
	engine.Store
	engine.PreparingStore
	engine.EventStore
	engine.StepPager
	scheduler.State
	// CheckWrite makes a tiny durable write: /healthz's proof that the
	// database takes writes.
	CheckWrite(ctx context.Context) error
	// DeleteEndedJobs and EndedBefore are the retention sweeper's.
	DeleteEndedJobs(ctx context.Context, cutoff time.Time, from []byte, budget int) (store.SweepResult, error)
	EndedBefore(ctx context.Context, ids []string, cutoff time.Time) ([]string, error)
	Close() error
}

// LogStore keeps the jobs' logs: JSONL files beside bbolt, a table in
// PostgreSQL (so any server on the database can read them).
type LogStore = store.LogBackend

// Both stores are what the server needs; a part missing from one fails
// the build here, not a request at run time.
var (
	_ StateStore              = (*store.DB)(nil)
	_ accounts.UserStore      = (*store.DB)(nil)
	_ LogStore                = (*store.Logs)(nil)
	_ store.RevisionSnapshots = (*store.Snapshots)(nil)
	_ LogStore                = (*postgres.Logs)(nil)
)

// storage is the server's state, opened from the storage section.
type storage struct {
	state     StateStore
	users     accounts.UserStore
	snapshots store.RevisionSnapshots
	logs      LogStore
	// pool reads the database pool's figures for /metrics; nil on bbolt.
	pool metrics.PoolFunc
	// pg is the PostgreSQL database, whose lease a replica of a pair
	// takes (ha.go); nil on bbolt.
	pg *postgres.DB

	closers []func() error // in the order opened
}

// openStorage opens what the state's records need before the workspaces
// are loaded: the database on PostgreSQL (failing start-up with the
// server named, password redacted, when it cannot be reached), the
// revision snapshots on bbolt. openRecords then opens the rest.
func openStorage(ctx context.Context, cfg *config.Server) (*storage, error) {
	if cfg.Storage.Postgres() {
		return openPostgres(ctx, cfg)
	}
	snaps, err := store.OpenSnapshots(filepath.Join(cfg.DataDir, "revisions"), cfg.Effective.Limits.WorkspaceSize)
	if err != nil {
		return nil, err
	}
	return &storage{snapshots: snaps}, nil
}

func openPostgres(ctx context.Context, cfg *config.Server) (*storage, error) {
	pc := postgres.Config{DSN: cfg.Storage.DSN, MaxConns: cfg.Storage.EffectiveMaxConns()}
	if cfg.HA.Enabled() {
		// A replica stopped inside a transaction must not hold the lease
		// row past the lease and block the takeover.
		pc.IdleInTransaction = cfg.HA.Lease / 2
	}
	db, err := postgres.Open(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	st := &storage{pool: func() metrics.PoolStats { return metrics.PoolStats(db.PoolStats()) }, closers: []func() error{db.Close},
		pg: db, state: db, users: db, snapshots: db.Snapshots(cfg.Effective.Limits.WorkspaceSize), logs: postgres.OpenLogs(db)}
	st.closers = append(st.closers, st.logs.Close)
	return st, nil
}

// openRecords opens bbolt's records and log files. A database from before
// jobs carried their access path gets them here, from the revisions their
// tasks were in (taskPath). On PostgreSQL openStorage opened everything.
func (st *storage) openRecords(cfg *config.Server, taskPath func(workspace, revision, task string) (string, bool)) error {
	if st.state != nil {
		return nil
	}
	db, err := store.OpenWith(cfg.DBPath(), store.Options{TaskPath: taskPath})
	if err != nil {
		return err
	}
	st.closers = append(st.closers, db.Close)
	st.state, st.users = db, db
	logs, err := store.OpenLogs(cfg.LogStorage.LocalDir)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, logs.Close)
	st.logs = logs
	return nil
}

// newSweeper is the retention sweeper over the storage's records and logs.
func (st *storage) newSweeper(cfg store.SweeperConfig) *store.Sweeper {
	cfg.DB, cfg.Logs = st.state, st.logs
	return store.NewSweeper(cfg)
}

// Close closes what is open, the last opened first.
func (st *storage) Close() error {
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i]())
	}
	st.closers = nil
	return errors.Join(errs...)
}
