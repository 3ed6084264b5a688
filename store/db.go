// Package store persists the engine's records in bbolt and keeps each job's log as a JSONL file.
// It must not import net/http, echo, api, app or runners.
package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

var _ engine.Store = (*DB)(nil)

// lockTimeout bounds the wait for bbolt's file lock: a second server on the
// same data dir should fail fast with a clear message, not hang.
const lockTimeout = time.Second

// defaultLimit is the page size when a caller passes limit <= 0.
const defaultLimit = 50

// Bucket names. Index buckets hold keys only (values are empty unless noted),
// so pagination walks small keys and decodes just the records of one page.
var (
	bucketJobs        = []byte("jobs")        // job id -> job JSON
	bucketSteps       = []byte("steps")       // job id \0 seq name -> step JSON
	bucketWorkers     = []byte("workers")     // worker id -> worker JSON
	bucketByTime      = []byte("idx_time")    // time id
	bucketByWorkspace = []byte("idx_ws")      // workspace \0 time id
	bucketByTask      = []byte("idx_task")    // workspace \0 task \0 time id
	bucketActive      = []byte("idx_active")  // job id (non-terminal jobs, and terminal ones with hooks pending)
	bucketWorkerSteps = []byte("idx_wsteps")  // worker id \0 time job id \0 step -> steps key
	bucketWorkerOrder = []byte("idx_workers") // registered time id
	bucketCounts      = []byte("counts")      // counter name -> uint64
	bucketByStatus    = []byte("idx_status")  // status \0 time id -> facets
	bucketBySource    = []byte("idx_source")  // source type \0 time id -> facets
	bucketStepStatus  = []byte("idx_sstatus") // job id \0 status \0 seq name -> steps key
	bucketByAccess    = []byte("idx_access")  // workspace \0 access path \0 task \0 time id
	bucketJobKeys     = []byte("idx_keys")    // idempotency key -> job id (see jobkeys.go)
	allBuckets        = [][]byte{bucketJobs, bucketSteps, bucketWorkers, bucketByTime, bucketByWorkspace, bucketByTask, bucketActive, bucketWorkerSteps, bucketWorkerOrder, bucketCounts, bucketByStatus, bucketBySource, bucketStepStatus, bucketByAccess, bucketJobKeys}
)

// DB is the bbolt implementation of engine.Store.
type DB struct {
	bolt     *bolt.DB
	auditKey audit.Key   // the audit chain's key (audit.go)
	written  lastWritten // see putAll
}

// Open opens (creating if needed) the database file at path.
func Open(path string) (*DB, error) { return OpenWith(path, Options{}) }

// Options are what opening a database may need beside its path.
type Options struct {
	// TaskPath serves the one-time migration that gives jobs written
	// before access paths existed theirs (see fillAccessPaths); without
	// it, those jobs get their bare task names.
	TaskPath TaskPathFunc
}

// OpenWith is Open with options.
func OpenWith(path string, o Options) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	// Sync stays on (bbolt's default): the engine acknowledges a decision
	// only after Commit returns, so Commit must be durable.
	b, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      lockTimeout,
		FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open %s: data dir is in use by another process: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		// A database from before the refresh tokens' user index gets it
		// built once, here.
		indexUserRefresh := tx.Bucket(bucketUserRefresh) == nil && tx.Bucket(bucketRefresh) != nil
		// A database from before the status and source indexes has jobs
		// but not those buckets: they are built from the jobs once.
		rebuild := tx.Bucket(bucketByStatus) == nil || tx.Bucket(bucketBySource) == nil
		rebuildSteps := tx.Bucket(bucketStepStatus) == nil
		// A database from before jobs carried their access path has
		// jobs but no access index: both are filled once.
		fillAccess := tx.Bucket(bucketByAccess) == nil
		for _, name := range slices.Concat(allBuckets, authBuckets, auditBuckets) {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if indexUserRefresh {
			if err := backfillUserRefresh(tx); err != nil {
				return err
			}
		}
		if rebuild {
			if err := rebuildListIndexes(tx); err != nil {
				return err
			}
		}
		if rebuildSteps {
			if err := rebuildStepStatusIndex(tx); err != nil {
				return err
			}
		}
		if fillAccess {
			return fillAccessPaths(tx, o.TaskPath)
		}
		return nil
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &DB{bolt: b}, nil
}

// Close releases the file and its lock.
func (db *DB) Close() error {
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// view runs a read transaction unless ctx is already done. bbolt readers
// never block the single writer.
func (db *DB) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bolt.View(fn)
}
