package api

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	units "github.com/docker/go-units"
	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// tarballsKept bounds the cache: the current revision of a few workspaces,
// plus the previous ones that running jobs still use.
const tarballsKept = 8

// tarballSuffix ends the workspace download path.
const tarballSuffix = ".tar.gz"

func (s *server) workspaceTarball(c echo.Context) error {
	file := c.Param("file")
	name, ok := strings.CutSuffix(file, tarballSuffix)
	if !ok || name == "" {
		return httpx.NotFound("workspace download %q (want /worker/workspace/<name>.tar.gz)", file)
	}
	ws, ok := s.cfg.Workspaces.Current(name)
	if !ok {
		return httpx.NotFound("workspace %q", name)
	}
	rev := ws.Revision
	if want := c.QueryParam("revision"); want != "" && want != rev {
		if _, ok := s.cfg.Workspaces.Revision(name, want); !ok && !s.hasSnapshot(name, want) {
			return httpx.NotFound("revision %q of workspace %q", want, name)
		}
		rev = want
	}
	etag := `"` + rev + `"`
	h := c.Response().Header()
	h.Set("X-Revision", rev)
	h.Set("ETag", etag)
	if etagMatches(c.Request().Header.Get("If-None-Match"), rev) {
		return c.NoContent(http.StatusNotModified)
	}
	data, err := s.tarballs.get(name, rev, func() ([]byte, error) { return s.revisionTarball(ws, rev) })
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/gzip", data)
}

// etagMatches applies If-None-Match: a list of tags, quoted or not, weak or
// strong, or `*`.
func etagMatches(header, rev string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || (tag != "" && strings.Trim(tag, `"`) == rev) {
			return true
		}
	}
	return false
}

// buildTarball packs the files of the workspace's folder, refusing a
// workspace whose files add up to more than max: every worker would
// refuse it (their workspace_limits.total_size defaults to the same), and
// the tarball is built in memory.
func buildTarball(ws *workflow.Workspace, max int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := workspace.Pack(&buf, ws.Dir, max); err != nil {
		if errors.Is(err, workspace.ErrTooBig) {
			return nil, fmt.Errorf("workspace %q: its files add up to more than limits.workspace_size (%s) of the server config, "+
				"so no worker would take it; ship less or raise the limit here and workspace_limits.total_size on the workers: %w",
				ws.Name, units.BytesSize(float64(max)), engine.ErrConflict)
		}
		return nil, fmt.Errorf("pack workspace %q: %w", ws.Name, err)
	}
	return buf.Bytes(), nil
}

// tarballCache keeps the most recently used tarballs, each built once even
// when many workers ask for it at the same moment.
type tarballCache struct {
	mu      sync.Mutex
	max     int
	entries []*tarballEntry // most recently used last
}

type tarballEntry struct {
	key  string
	once sync.Once
	data []byte
	err  error
}

func newTarballCache(max int) *tarballCache { return &tarballCache{max: max} }

func (tc *tarballCache) get(workspace, rev string, build func() ([]byte, error)) ([]byte, error) {
	key := workspace + "\x00" + rev
	tc.mu.Lock()
	var e *tarballEntry
	for i, x := range tc.entries {
		if x.key == key {
			e = x
			tc.entries = append(tc.entries[:i], tc.entries[i+1:]...)
			break
		}
	}
	if e == nil {
		e = &tarballEntry{key: key}
	}
	tc.entries = append(tc.entries, e)
	if len(tc.entries) > tc.max {
		tc.entries = tc.entries[len(tc.entries)-tc.max:]
	}
	tc.mu.Unlock()

	e.once.Do(func() { e.data, e.err = build() })
	if e.err != nil {
		// A failure is not cached: the next request tries again.
		tc.drop(e)
	}
	return e.data, e.err
}

func (tc *tarballCache) drop(e *tarballEntry) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for i, x := range tc.entries {
		if x == e {
			tc.entries = append(tc.entries[:i], tc.entries[i+1:]...)
			return
		}
	}
}
