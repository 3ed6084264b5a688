package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// snapshotExt ends every snapshot file.
const snapshotExt = ".tar.gz"

// ErrSnapshotStale is returned by Save when the files on disk no longer
// hash to the revision being saved (they changed since it was loaded).
var ErrSnapshotStale = errors.New("workspace files changed since the revision was loaded")

// RevisionSnapshots keeps the files of every workspace revision jobs use,
// content-addressed, so a step runs on its job's revision wherever and
// whenever it runs. Snapshots keeps them as files under the data folder;
// the PostgreSQL store keeps them in the database, so that every replica
// serves every revision (postgres.(*DB).Snapshots).
//
// Its methods take no context: their callers (the registry's load hook,
// the workers' snapshot cache, the tarball endpoint) have none to give; a
// store that waits on a network bounds each call itself.
type RevisionSnapshots interface {
	// Has reports whether a revision's snapshot exists.
	Has(workspace, revision string) bool
	// Open returns a revision's gzip tarball; os.ErrNotExist when there is
	// none.
	Open(workspace, revision string) (io.ReadCloser, error)
	// Save snapshots the files of a loaded revision, unless its snapshot
	// exists (then it counts as used now). Files over the size limit are
	// workspace.ErrTooBig; files that no longer hash to the revision,
	// ErrSnapshotStale.
	Save(ws *workflow.Workspace) error
	// Sweep removes the snapshots keep does not want and that were not
	// used (saved or kept by an earlier sweep) within grace of now, marks
	// the ones it keeps as used now, and returns how many it removed.
	Sweep(keep func(workspace, revision string) bool, grace time.Duration, now time.Time) (int, error)
}

var _ RevisionSnapshots = (*Snapshots)(nil)

// CheckSnapshotName refuses the names no snapshot may have (empty, dotted,
// path-like, with a NUL byte) as not existing, in every RevisionSnapshots:
// a file store would otherwise read outside its folder.
func CheckSnapshotName(workspace, revision string) error {
	for _, n := range []string{workspace, revision} {
		if n == "" || n == "." || n == ".." || strings.HasPrefix(n, ".") || strings.ContainsAny(n, `/\`+"\x00") {
			return fmt.Errorf("revision snapshot %q/%q: %w", workspace, revision, os.ErrNotExist)
		}
	}
	return nil
}

// Snapshots keeps every workspace revision that jobs use as a gzip tarball
// of its files, `<dir>/<workspace>/<revision>.tar.gz`. A snapshot is
// content-addressed: it is written only when its files hash to the revision
// it is named after, so a revision's files are the same wherever and
// whenever a step runs on them, whatever happened to the folder since.
// Files are written to a temporary name and renamed, so a crash never
// leaves half a snapshot under a revision's name.
type Snapshots struct {
	dir string
	max int64 // bytes of files per snapshot
}

// OpenSnapshots keeps snapshots under dir, refusing workspaces whose files
// add up to more than max bytes.
func OpenSnapshots(dir string, max int64) (*Snapshots, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open revision snapshots: %w", err)
	}
	return &Snapshots{dir: dir, max: max}, nil
}

// Dir is the folder holding the snapshots.
func (s *Snapshots) Dir() string { return s.dir }

func (s *Snapshots) path(workspace, revision string) (string, error) {
	if err := CheckSnapshotName(workspace, revision); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, workspace, revision+snapshotExt), nil
}

// Has reports whether a revision's snapshot exists.
func (s *Snapshots) Has(workspace, revision string) bool {
	p, err := s.path(workspace, revision)
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// Open returns a revision's tarball (os.ErrNotExist when there is none).
func (s *Snapshots) Open(workspace, revision string) (io.ReadCloser, error) {
	p, err := s.path(workspace, revision)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err // not a nil *os.File in a non-nil interface
	}
	return f, nil
}

// Save snapshots the files of a loaded revision, unless its snapshot exists.
// ErrSnapshotStale when the folder no longer holds that revision.
func (s *Snapshots) Save(ws *workflow.Workspace) error {
	target, err := s.path(ws.Name, ws.Revision)
	if err != nil {
		return err
	}
	if _, err := os.Stat(target); err == nil {
		touch(target)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".tmp-*")
	if err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	rev, err := workspace.Pack(tmp, ws.Dir, s.max)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	if rev != ws.Revision {
		return fmt.Errorf("snapshot workspace %q revision %s (the files now hash to %s): %w", ws.Name, ws.Revision, rev, ErrSnapshotStale)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("snapshot workspace %q: %w", ws.Name, err)
	}
	return syncDir(filepath.Dir(target))
}

// Sweep removes the snapshots that keep does not want and that were not
// used (saved or kept by an earlier sweep) within grace, and touches the
// ones it keeps. grace covers a job being created on a revision between
// the moment its caller chose the revision and the moment keep was asked.
// It returns how many it removed.
func (s *Snapshots) Sweep(keep func(workspace, revision string) bool, grace time.Duration, now time.Time) (int, error) {
	wss, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("sweep revision snapshots: %w", err)
	}
	removed := 0
	for _, w := range wss {
		if !w.IsDir() {
			continue
		}
		dir := filepath.Join(s.dir, w.Name())
		files, err := os.ReadDir(dir)
		if err != nil {
			return removed, fmt.Errorf("sweep revision snapshots: %w", err)
		}
		for _, f := range files {
			p := filepath.Join(dir, f.Name())
			fi, err := f.Info()
			if err != nil {
				continue
			}
			if strings.HasPrefix(f.Name(), ".tmp-") {
				if now.Sub(fi.ModTime()) > time.Hour { // a crashed Save's leftover
					_ = os.Remove(p)
				}
				continue
			}
			rev, ok := strings.CutSuffix(f.Name(), snapshotExt)
			if !ok {
				continue
			}
			if keep(w.Name(), rev) {
				_ = os.Chtimes(p, now, now)
				continue
			}
			if now.Sub(fi.ModTime()) < grace {
				continue
			}
			if err := os.Remove(p); err == nil {
				removed++
			}
		}
	}
	return removed, nil
}

func touch(p string) {
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.Sync() // not every file system syncs directories
	return nil
}
