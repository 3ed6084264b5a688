package api

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// hasSnapshot reports whether a revision's tarball was saved.
func (s *server) hasSnapshot(workspace, revision string) bool {
	if s.cfg.Snapshots == nil {
		return false
	}
	f, err := s.cfg.Snapshots(workspace, revision)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// revisionTarball returns the tarball of revision rev of a workspace whose
// current revision is cur: its saved snapshot, or else (for the current
// revision only, when snapshots are off or the save failed) one packed
// from the folder now.
func (s *server) revisionTarball(cur *workflow.Workspace, rev string) ([]byte, error) {
	if s.cfg.Snapshots != nil {
		f, err := s.cfg.Snapshots(cur.Name, rev)
		switch {
		case err == nil:
			defer f.Close()
			data, err := io.ReadAll(f)
			if err != nil {
				return nil, fmt.Errorf("read revision %s of workspace %q: %w", rev, cur.Name, err)
			}
			return data, nil
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("open revision %s of workspace %q: %w", rev, cur.Name, err)
		}
	}
	// Only the revision in use is on disk: an older one is served only
	// while its tarball is still cached.
	if rev != cur.Revision {
		return nil, httpx.NotFound("revision %q of workspace %q is no longer available for download", rev, cur.Name)
	}
	return buildTarball(cur, s.cfg.MaxWorkspace)
}
