package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/dump"
)

// snapshotTimeout bounds each call on the snapshots: their callers have
// no context to give (see store.RevisionSnapshots), and a tarball is at
// most the workspace size limit.
const snapshotTimeout = time.Minute

// Snapshots keeps workspace revision snapshots in the database, one row a
// revision, so that every replica serves every revision a job runs on. It
// is content-addressed as the files are: a snapshot is stored only when
// its files hash to the revision it is named after.
type Snapshots struct {
	db  *DB
	max int64 // bytes of files per snapshot
}

var _ store.RevisionSnapshots = (*Snapshots)(nil)

// Snapshots returns the database's revision snapshots, refusing
// workspaces whose files add up to more than max bytes.
func (db *DB) Snapshots(max int64) *Snapshots { return &Snapshots{db: db, max: max} }

// checkName refuses what the file store refuses, and what a text column
// cannot hold, as not existing.
func checkName(workspace, revision string) error {
	if err := store.CheckSnapshotName(workspace, revision); err != nil {
		return err
	}
	if !storable(workspace, revision) {
		return fmt.Errorf("revision snapshot %q/%q: %w", workspace, revision, os.ErrNotExist)
	}
	return nil
}

// Has reports whether a revision's snapshot exists; a database it cannot
// reach has none.
func (s *Snapshots) Has(workspace, revision string) bool {
	if checkName(workspace, revision) != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	var ok bool
	err := s.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revision_snapshots WHERE workspace = $1 AND revision = $2)`,
		workspace, revision).Scan(&ok)
	return err == nil && ok
}

// Open returns a revision's tarball (os.ErrNotExist when there is none),
// read whole: it is bounded by the size limit, and the connection goes
// back to the pool at once.
func (s *Snapshots) Open(workspace, revision string) (io.ReadCloser, error) {
	if err := checkName(workspace, revision); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	var tarball []byte
	err := s.db.pool.QueryRow(ctx, `SELECT tarball FROM revision_snapshots WHERE workspace = $1 AND revision = $2`,
		workspace, revision).Scan(&tarball)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("revision snapshot %q/%q: %w", workspace, revision, os.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read revision snapshot %q/%q: %w", workspace, revision, err)
	}
	return io.NopCloser(bytes.NewReader(tarball)), nil
}

// Save snapshots the files of a loaded revision, unless its snapshot
// exists (then it is marked used now). workspace.ErrTooBig over the size
// limit; store.ErrSnapshotStale when the folder no longer holds that
// revision. Two replicas saving one revision at once store it once: the
// bytes are the same, whoever wins.
func (s *Snapshots) Save(ws *workflow.Workspace) error {
	if err := checkName(ws.Name, ws.Revision); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	now := time.Now()
	tag, err := s.db.pool.Exec(ctx, `UPDATE revision_snapshots SET used_at = $3 WHERE workspace = $1 AND revision = $2`,
		ws.Name, ws.Revision, now)
	if err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var buf bytes.Buffer
	rev, err := workspace.Pack(&buf, ws.Dir, s.max)
	if err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	if rev != ws.Revision {
		return fmt.Errorf("snapshot workspace %q revision %s (the files now hash to %s): %w", ws.Name, ws.Revision, rev, store.ErrSnapshotStale)
	}
	_, err = s.db.pool.Exec(ctx, `INSERT INTO revision_snapshots (workspace, revision, tarball, created_at, used_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (workspace, revision) DO UPDATE SET used_at = excluded.used_at`,
		ws.Name, ws.Revision, buf.Bytes(), now)
	if err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	return nil
}

// Sweep removes the snapshots that keep does not want and that were not
// used within grace, and marks the ones it keeps used now. A snapshot
// saved again by another replica while the sweep ran is not removed: the
// delete checks its use time again.
func (s *Snapshots) Sweep(keep func(workspace, revision string) bool, grace time.Duration, now time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	rows, err := s.db.pool.Query(ctx, `SELECT workspace, revision, used_at FROM revision_snapshots`)
	if err != nil {
		return 0, fmt.Errorf("sweep revision snapshots: %w", err)
	}
	type snap struct {
		Workspace, Revision string
		UsedAt              time.Time
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[snap])
	if err != nil {
		return 0, fmt.Errorf("sweep revision snapshots: %w", err)
	}
	var keptWs, keptRev, goneWs, goneRev []string
	for _, sn := range all {
		switch {
		case keep(sn.Workspace, sn.Revision):
			keptWs, keptRev = append(keptWs, sn.Workspace), append(keptRev, sn.Revision)
		case now.Sub(sn.UsedAt) >= grace:
			goneWs, goneRev = append(goneWs, sn.Workspace), append(goneRev, sn.Revision)
		}
	}
	if len(keptWs) > 0 {
		if _, err := s.db.pool.Exec(ctx, `UPDATE revision_snapshots s SET used_at = $3
			FROM unnest($1::text[], $2::text[]) AS k(workspace, revision)
			WHERE s.workspace = k.workspace AND s.revision = k.revision`, keptWs, keptRev, now); err != nil {
			return 0, fmt.Errorf("sweep revision snapshots: %w", err)
		}
	}
	if len(goneWs) == 0 {
		return 0, nil
	}
	tag, err := s.db.pool.Exec(ctx, `DELETE FROM revision_snapshots s
		USING unnest($1::text[], $2::text[]) AS g(workspace, revision)
		WHERE s.workspace = g.workspace AND s.revision = g.revision AND s.used_at <= $3`,
		goneWs, goneRev, now.Add(-grace))
	if err != nil {
		return 0, fmt.Errorf("sweep revision snapshots: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// List names every snapshot kept, in name order (an export's).
func (s *Snapshots) List() ([]dump.SnapshotRef, error) {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	rows, err := s.db.pool.Query(ctx, `SELECT workspace, revision FROM revision_snapshots ORDER BY workspace, revision`)
	if err != nil {
		return nil, fmt.Errorf("list revision snapshots: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (dump.SnapshotRef, error) {
		var ref dump.SnapshotRef
		err := r.Scan(&ref.Workspace, &ref.Revision)
		return ref, err
	})
}

// Put stores a snapshot's tarball as it is (an import's).
func (s *Snapshots) Put(workspace, revision string, tarGz io.Reader) error {
	if err := checkName(workspace, revision); err != nil {
		return err
	}
	b, err := io.ReadAll(tarGz)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	now := time.Now()
	_, err = s.db.pool.Exec(ctx, `INSERT INTO revision_snapshots (workspace, revision, tarball, created_at, used_at)
		VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (workspace, revision) DO UPDATE SET tarball = excluded.tarball, used_at = excluded.used_at`,
		workspace, revision, b, now)
	if err != nil {
		return fmt.Errorf("put revision snapshot %q/%q: %w", workspace, revision, err)
	}
	return nil
}
