package worker

import (
	"context"
	"io"
)

// OpenRevision opens a workspace revision's gzip tarball: revision "" means
// the current one. It returns the revision opened and wraps ErrNotFound
// when there is no such revision.
type OpenRevision func(workspace, revision string) (rev string, tarball io.ReadCloser, err error)

// SnapshotWorkspaces gives a worker living in the server's process the
// workspace files of a job's revision exactly as a remote worker gets them:
// the revision's tarball, extracted once into a cache folder and reused by
// every step on that revision. Steps never run in the live workspace
// folder, so editing a file there changes nothing for jobs already created.
type SnapshotWorkspaces struct {
	cache *workspaceCache
}

// NewSnapshotWorkspaces extracts the tarballs open returns under dir.
func NewSnapshotWorkspaces(dir string, limits WorkspaceLimits, open OpenRevision) *SnapshotWorkspaces {
	fetch := func(_ context.Context, ws, want, cached string) (*download, error) {
		if want != "" && want == cached {
			return &download{notModified: true, revision: cached}, nil
		}
		rev, body, err := open(ws, want)
		if err != nil {
			return nil, err
		}
		if rev == cached {
			body.Close()
			return &download{notModified: true, revision: cached}, nil
		}
		return &download{revision: rev, body: body}, nil
	}
	return &SnapshotWorkspaces{cache: newWorkspaceCache(dir, limits.orDefaults(), fetch)}
}

// Get returns the folder holding a workspace's files at revision (its
// current files if the revision is gone).
func (s *SnapshotWorkspaces) Get(ctx context.Context, workspace, revision string) (string, error) {
	return s.cache.get(ctx, workspace, revision)
}
