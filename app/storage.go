package app

// TODO(pg-integration): `storage: {type: postgres}` connects, migrates and
// then refuses to start (errPostgresIncomplete) until the rest of
// store/postgres is merged. Each part is one line in openPostgres, then the
// refusal goes:
//
//  1. pg-core: *postgres.DB satisfies StateStore (the engine's Store with
//     PreparingStore, EventStore and StepPager, the scheduler's State,
//     CheckWrite, and the retention's DeleteEndedJobs and EndedBefore):
//     `st.state = db`.
//  2. pg-accounts: *postgres.DB satisfies accounts.UserStore:
//     `st.users = db`; its revision snapshots satisfy snapshotStore:
//     `st.snapshots = <its constructor>(db)` (Open answers os.ErrNotExist
//     for a revision it lacks, as revisions.open expects).
//  3. pg-logs: the job logs in the database satisfy LogStore:
//     `st.logs = <its constructor>(db)`. store.NewArchivingLogs and
//     store.SweeperConfig then take interfaces: openArchive takes st.logs,
//     newSweeper sets `DB: st.state, Logs: st.logs`, and the fields bolt
//     and files below go.
//  4. Delete errPostgresIncomplete and its test
//     (TestPostgresStorageIsRefusedUntilComplete, app/storage_test.go),
//     and start a real server on pgtest instead (its /metrics then shows
//     the appliance_db_ series through st.pool, already wired).
//  5. README, "Storage": delete the paragraph under its TODO(pg-integration).
//  6. store/postgres/db.go: Open wraps migrate's error, already naming the
//     server (connect's describe), in describe again, so serve prints
//     "PostgreSQL at H (...): PostgreSQL at H (...): ..." (not fixed here:
//     that file is not this branch's).

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
// PostgreSQL (so any server on the database can read and stream them).
type LogStore interface {
	serverLogs
	SetLimits(store.LogLimits)
	Close() error
}

// Both stores are what the server needs; a part missing from one fails
// the build here, not a request at run time.
var (
	_ StateStore              = (*store.DB)(nil)
	_ accounts.UserStore      = (*store.DB)(nil)
	_ LogStore                = (*store.Logs)(nil)
	_ store.RevisionSnapshots = (*store.Snapshots)(nil)
)

// storage is the server's state, opened from the storage section.
type storage struct {
	state     StateStore
	users     accounts.UserStore
	snapshots store.RevisionSnapshots
	logs      LogStore
	// pool reads the database pool's figures for /metrics; nil on bbolt.
	pool metrics.PoolFunc

	// bolt and files are bbolt's records and log files as the retention
	// sweeper and the log archive still take them (TODO(pg-integration) 3).
	bolt  *store.DB
	files *store.Logs

	closers []func() error // in the order opened
}

// errPostgresIncomplete refuses storage.type postgres while this build
// cannot keep every record there (TODO(pg-integration) 4): half the state
// in PostgreSQL and half in data_dir would lose the rest with the machine.
var errPostgresIncomplete = errors.New("storage.type: postgres: this build connects to the database and applies its " +
	"schema, but cannot yet keep the jobs, users and logs there; use storage.type: bbolt (the default) until it can")

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
		state: db, users: db, snapshots: db.Snapshots(cfg.Effective.Limits.WorkspaceSize)}
	// TODO(pg-integration) 3: st.logs.
	_ = st.Close()
	return nil, errPostgresIncomplete
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
	st.state, st.users, st.bolt = db, db, db
	logs, err := store.OpenLogs(cfg.LogStorage.LocalDir)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, logs.Close)
	st.logs, st.files = logs, logs
	return nil
}

// newSweeper is the retention sweeper over the storage's records and logs.
func (st *storage) newSweeper(cfg store.SweeperConfig) *store.Sweeper {
	// TODO(pg-integration) 3: cfg.DB, cfg.Logs = st.state, st.logs
	cfg.DB, cfg.Logs = st.bolt, st.files
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
