package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/runners/worker"
	"github.com/appliance-sh/appliance/store"
)

// Revision snapshots: every revision a job is created on is packed (under
// data_dir/revisions, or in the database with PostgreSQL storage) before
// the registry publishes it, and both kinds of
// worker run a step on its job's snapshot: remote ones download it from the
// tarball endpoint, in-process ones extract it into data_dir/workspaces.
// A snapshot lives while a pending or running job uses it (or it is the
// current revision of its workspace) and is swept a grace period after.
const (
	revisionSweepInterval = 5 * time.Minute
	// revisionSweepGrace covers a job being created on a revision its caller
	// read as current just before a reload replaced it.
	revisionSweepGrace = 2 * revisionSweepInterval
)

// revisions keeps the snapshots and sweeps the ones no live job needs.
type revisions struct {
	snaps      store.RevisionSnapshots
	registry   *workspace.Registry
	live       func(context.Context) (map[string]map[string]bool, error)
	log        *slog.Logger
	interval   time.Duration
	grace      time.Duration
	extractDir string
	// files extracts snapshots for the in-process workers and for loading
	// a revision the registry no longer holds.
	files    *worker.SnapshotWorkspaces
	loadOpts workspace.LoadOptions

	mu     sync.Mutex
	loaded map[string]*workflow.Workspace // by workspace + "\x00" + revision
}

// openRevisions snapshots into snaps each revision the registry loads from
// now on, starting with the current ones; in-process workers extract them
// under data_dir/workspaces.
func openRevisions(snaps store.RevisionSnapshots, dataDir string, max int64, registry *workspace.Registry, loadOpts workspace.LoadOptions, log *slog.Logger) *revisions {
	r := &revisions{snaps: snaps, registry: registry, log: log, interval: revisionSweepInterval,
		grace: revisionSweepGrace, extractDir: filepath.Join(dataDir, "workspaces"), loadOpts: loadOpts,
		loaded: map[string]*workflow.Workspace{}}
	r.files = worker.NewSnapshotWorkspaces(r.extractDir, worker.WorkspaceLimits{TotalSize: max}, r.open)
	registry.OnLoad(func(ws *workflow.Workspace) {
		if err := snaps.Save(ws); err != nil {
			// Jobs on this revision fall back to the workspace's current
			// files; a stale one is followed by a reload of the new files.
			log.Warn("cannot snapshot workspace revision", "workspace", ws.Name, "revision", ws.Revision, "err", err)
		}
	})
	return r
}

// open serves a revision's tarball (the current one for ""), for the
// in-process workers and the tarball endpoint alike.
func (r *revisions) open(workspace, revision string) (string, io.ReadCloser, error) {
	if revision == "" {
		ws, ok := r.registry.Current(workspace)
		if !ok {
			return "", nil, fmt.Errorf("workspace %q: %w", workspace, worker.ErrNotFound)
		}
		revision = ws.Revision
	}
	f, err := r.snaps.Open(workspace, revision)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, fmt.Errorf("revision %s of workspace %q: %w", revision, workspace, worker.ErrNotFound)
	}
	if err != nil {
		return "", nil, err
	}
	return revision, f, nil
}

// sweep removes the snapshots that neither a live job nor a workspace's
// current revision needs.
func (r *revisions) sweep(ctx context.Context, now time.Time, grace time.Duration) (int, error) {
	live, err := r.live(ctx)
	if err != nil {
		return 0, err
	}
	keep := func(workspace, revision string) bool {
		if live[workspace][revision] {
			return true
		}
		ws, ok := r.registry.Current(workspace)
		return ok && ws.Revision == revision
	}
	return r.snaps.Sweep(keep, grace, now)
}

// run sweeps at start and then every interval until ctx ends.
func (r *revisions) run(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		if n, err := r.sweep(ctx, time.Now(), r.grace); err != nil {
			if ctx.Err() != nil || errors.Is(err, engine.ErrStopped) {
				return nil
			}
			r.log.Warn("sweep revision snapshots", "err", err)
		} else if n > 0 {
			r.log.Info("removed revision snapshots no job needs", "removed", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Current is the registry's.
func (r *revisions) Current(name string) (*workflow.Workspace, bool) { return r.registry.Current(name) }

// Revision is the registry's, or else the revision loaded from its
// snapshot: after a restart the registry holds only the current revision,
// and a job created on an older one goes on with that one's definitions
// (inline scripts, templates), not the current ones. A loaded revision is
// kept for the server's life (only jobs that outlived a restart need one).
func (r *revisions) Revision(name, revision string) (*workflow.Workspace, bool) {
	if ws, ok := r.registry.Revision(name, revision); ok {
		return ws, true
	}
	key := name + "\x00" + revision
	r.mu.Lock()
	defer r.mu.Unlock()
	if ws, ok := r.loaded[key]; ok {
		return ws, ws != nil // nil: it failed to load before
	}
	if !r.snaps.Has(name, revision) {
		return nil, false
	}
	dir, err := r.files.Get(context.Background(), name, revision)
	if err != nil {
		r.log.Warn("cannot extract a revision snapshot", "workspace", name, "revision", revision, "err", err)
		r.loaded[key] = nil
		return nil, false
	}
	ws, err := workspace.LoadWith(name, dir, nil, r.loadOpts)
	if err != nil || ws.Revision != revision {
		r.log.Warn("cannot load a revision snapshot", "workspace", name, "revision", revision, "err", err)
		r.loaded[key] = nil
		return nil, false
	}
	r.loaded[key] = ws
	return ws, true
}

// taskPath is where a task was in a revision of a workspace (loaded from
// its snapshot if need be), or else in the current one: the store's
// migration gives old jobs their access paths with it.
func (r *revisions) taskPath(workspace, revision, task string) (string, bool) {
	for _, load := range []func() (*workflow.Workspace, bool){
		func() (*workflow.Workspace, bool) { return r.Revision(workspace, revision) },
		func() (*workflow.Workspace, bool) { return r.Current(workspace) },
	} {
		if ws, ok := load(); ok {
			if t := ws.Tasks[task]; t != nil {
				return workflow.TaskPath(t.Folder, task), true
			}
		}
	}
	return "", false
}
