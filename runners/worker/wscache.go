package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// keepRevisions is how many revisions of a workspace stay cached; older ones
// are removed when a new one arrives.
const keepRevisions = 3

// download is one answer of GET /worker/workspace/{ws}.tar.gz.
type download struct {
	notModified bool
	revision    string
	body        io.ReadCloser // the gzip tarball, when not notModified
}

// workspaceCache keeps extracted workspaces at <dir>/<ws>/<revision>/.
type workspaceCache struct {
	dir    string
	limits WorkspaceLimits
	fetch  func(ctx context.Context, ws, want, cached string) (*download, error)

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per workspace: one download at a time
}

func newWorkspaceCache(dir string, limits WorkspaceLimits, fetch func(ctx context.Context, ws, want, cached string) (*download, error)) *workspaceCache {
	return &workspaceCache{dir: dir, limits: limits, fetch: fetch, locks: map[string]*sync.Mutex{}}
}

func (c *workspaceCache) lock(ws string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.locks[ws]
	if !ok {
		m = &sync.Mutex{}
		c.locks[ws] = m
	}
	return m
}

// get returns the directory of ws at revision: the cached copy of that
// revision, or else what the server has, asked with the newest cached
// revision (If-None-Match) and downloaded unless that is current.
func (c *workspaceCache) get(ctx context.Context, ws, revision string) (string, error) {
	if err := safeName("workspace", ws); err != nil {
		return "", err
	}
	if revision != "" {
		if err := safeName("revision", revision); err != nil {
			return "", err
		}
	}
	m := c.lock(ws)
	m.Lock()
	defer m.Unlock()

	wsDir := filepath.Join(c.dir, ws)
	if revision != "" && isDir(filepath.Join(wsDir, revision)) {
		// A revision names its content: the cached copy is right, and a
		// step needs no request to the server for it.
		return c.use(wsDir, revision), nil
	}
	have := newestRevision(wsDir)

	d, err := c.fetch(ctx, ws, revision, have)
	if errors.Is(err, ErrNotFound) && revision != "" {
		// The server no longer has the job's revision: its current files
		// are the best there is.
		d, err = c.fetch(ctx, ws, "", newestRevision(wsDir))
	}
	if err != nil {
		return "", err
	}
	if d.notModified {
		if have == "" {
			return "", fmt.Errorf("workspace %q: server answered 304 to a request without If-None-Match", ws)
		}
		return c.use(wsDir, have), nil
	}
	defer d.body.Close()
	if err := safeName("revision", d.revision); err != nil {
		return "", fmt.Errorf("workspace %q: server revision header: %w", ws, err)
	}
	target := filepath.Join(wsDir, d.revision)
	if !isDir(target) {
		if err := extractInto(d.body, wsDir, target, c.limits); err != nil {
			return "", fmt.Errorf("workspace %q revision %s: %w", ws, d.revision, err)
		}
	}
	got := d.revision
	if revision != "" && got != revision && isDir(filepath.Join(wsDir, revision)) {
		// The server moved on; the job runs on the revision it started with.
		got = revision
	}
	dir := c.use(wsDir, got)
	prune(wsDir, got, d.revision)
	return dir, nil
}

// use marks a revision as recently used (pruning keeps the newest) and
// returns its directory.
func (c *workspaceCache) use(wsDir, revision string) string {
	dir := filepath.Join(wsDir, revision)
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	return dir
}

// extractInto unpacks into a temporary sibling of target and renames it into
// place, so an interrupted or refused download never looks like a cached
// revision; a refused one is removed at once, not left for prune.
func extractInto(r io.Reader, wsDir, target string, lim WorkspaceLimits) error {
	if err := os.MkdirAll(wsDir, 0o755); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	tmp, err := os.MkdirTemp(wsDir, ".tmp-")
	if err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	if err := extractTarGz(r, tmp, lim); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.RemoveAll(tmp)
		if isDir(target) {
			return nil // another worker process sharing the cache was first
		}
		return fmt.Errorf("store workspace: %w", err)
	}
	return nil
}

// newestRevision is the most recently used cached revision, or "".
func newestRevision(wsDir string) string {
	revs := cachedRevisions(wsDir)
	if len(revs) == 0 {
		return ""
	}
	return revs[0].name
}

type cachedRev struct {
	name string
	used time.Time
}

// cachedRevisions lists cached revisions, most recently used first.
func cachedRevisions(wsDir string) []cachedRev {
	entries, err := os.ReadDir(wsDir)
	if err != nil {
		return nil
	}
	var revs []cachedRev
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			revs = append(revs, cachedRev{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(revs, func(i, j int) bool { return revs[i].used.After(revs[j].used) })
	return revs
}

// prune removes all but the keepRevisions most recently used revisions
// (never the ones named in keep) and temporary leftovers of crashed downloads.
func prune(wsDir string, keep ...string) {
	kept := 0
	for _, r := range cachedRevisions(wsDir) {
		if kept < keepRevisions || contains(keep, r.name) {
			kept++
			continue
		}
		_ = os.RemoveAll(filepath.Join(wsDir, r.name))
	}
	entries, _ := os.ReadDir(wsDir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), ".tmp-") && time.Since(fi.ModTime()) > time.Hour {
			_ = os.RemoveAll(filepath.Join(wsDir, e.Name()))
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// safeName refuses a name that cannot be one path component of the cache.
func safeName(what, name string) error {
	if name == "" || name == "." || name == ".." || strings.HasPrefix(name, ".") ||
		strings.ContainsAny(name, `/\`+"\x00") {
		return fmt.Errorf("invalid %s name %q", what, name)
	}
	return nil
}

// download fetches a workspace tarball at revision want (its current one if
// empty); cached is the revision the caller already has, sent as the ETag it
// came with.
func (c *Client) download(ctx context.Context, ws, want, cached string) (*download, error) {
	if c.baseErr != nil {
		return nil, fmt.Errorf("download workspace: %w", c.baseErr)
	}
	path := "/worker/workspace/" + url.PathEscape(ws) + ".tar.gz"
	// The deadline covers the body too: it is cancelled when the body is closed.
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	var q url.Values
	if want != "" {
		q = url.Values{"revision": {want}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path, q), nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("download workspace: %w", err)
	}
	if cached != "" {
		req.Header.Set("If-None-Match", `"`+cached+`"`)
	}
	resp, err := c.do(req, "")
	if err != nil {
		c.failedOver(req)
		cancel()
		return nil, fmt.Errorf("download workspace: %w", err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		c.failedOver(req)
	}
	switch {
	case resp.StatusCode == http.StatusNotModified:
		resp.Body.Close()
		cancel()
		return &download{notModified: true, revision: cached}, nil
	case resp.StatusCode/100 != 2:
		defer cancel()
		defer resp.Body.Close()
		return nil, statusError("download workspace", path, resp)
	}
	rev := resp.Header.Get("X-Revision")
	if rev == "" {
		rev = strings.Trim(strings.TrimPrefix(resp.Header.Get("ETag"), "W/"), `"`)
	}
	if rev == "" {
		resp.Body.Close()
		cancel()
		return nil, errors.New("download workspace: answer has neither X-Revision nor ETag")
	}
	return &download{revision: rev, body: cancelOnClose{resp.Body, cancel}}, nil
}

// cancelOnClose releases a request's context once its body is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// FetchWorkspace downloads a workspace revision and unpacks it into dir,
// within limits: what a step pod's init container does, with a token bound
// to the step.
func (c *Client) FetchWorkspace(ctx context.Context, workspace, revision, dir string, limits WorkspaceLimits) error {
	d, err := c.download(ctx, workspace, revision, "")
	if err != nil {
		return err
	}
	defer d.body.Close()
	if err := extractTarGz(d.body, dir, limits); err != nil {
		return fmt.Errorf("unpack workspace %s at %s: %w", workspace, revision, err)
	}
	return nil
}
