package e2e

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// zeroBytes is an endless stream of zeros.
type zeroBytes struct{}

func (zeroBytes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// startBombProxy stands between a worker and the server, answering every
// workspace download with a gzip bomb: 256 files of 256MB of zeros, 64GB
// in all, made as the worker reads it; the rest goes to the server. sent
// counts the gzip bytes that left.
func startBombProxy(t *testing.T, target string) (proxyURL string, sent *atomic.Int64) {
	proxy, _ := workerProxy(t, target)
	sent = &atomic.Int64{}
	return serveProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/worker/workspace/") {
			proxy.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		w.Header().Set("X-Revision", r.URL.Query().Get("revision"))
		cw := &countingWriter{w: w, n: sent}
		gz := gzip.NewWriter(cw)
		tw := tar.NewWriter(gz)
		// Each write fails once the worker hangs up, which ends this.
		for i := 0; i < 256; i++ {
			if tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("bomb/%03d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: 256 << 20}) != nil {
				return
			}
			if _, err := io.CopyN(tw, zeroBytes{}, 256<<20); err != nil {
				return
			}
		}
		tw.Close()
		gz.Close()
	})), sent
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestRemoteWorkerRefusesAGzipBombAndFailsTheStep serves a real worker
// process a 64GB bomb as its workspace: the step fails with the limit that
// stopped it, and the worker's cache keeps nothing of it.
func TestRemoteWorkerRefusesAGzipBombAndFailsTheStep(t *testing.T) {
	for _, tc := range []struct {
		name, settings, want string
	}{
		{"default limits", "", "workspace tarball exceeds workspace_limits.ratio (100:1)"},
		{"configured total size", "workspace_limits:\n  total_size: 4MB\n  ratio: 100000\n", "workspace tarball exceeds workspace_limits.total_size (4MB)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := remoteFixture(t, `
tasks:
  run:
    flow:
      hello:
        type: script
        script: echo should not run
`)
			proxyURL, sent := startBombProxy(t, f.url)
			p := startWorkerProcess(t, proxyURL, workerToken, "remote-1", tc.settings)

			id := f.execute("main", "run", nil)
			j := f.waitTerminal(id)
			s := j.step("hello")
			if j.Status != "failed" || s.Status != "failed" || s.ErrorMessage == nil || !strings.Contains(*s.ErrorMessage, tc.want) {
				t.Fatalf("job %s, step %s with error %q; want failed with %q", j.Status, s.Status, deref(s.ErrorMessage), tc.want)
			}
			if logs := f.logs(id, "hello"); strings.Contains(logs, "should not run") {
				t.Fatalf("the step ran on the refused workspace: %s", logs)
			}
			waitUntil(t, "the worker to log the refusal", func() bool {
				return strings.Contains(p.stderr.String(), "workspace tarball refused")
			})
			entries, err := os.ReadDir(filepath.Join(p.cache, "main"))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			for _, e := range entries {
				t.Errorf("worker cache keeps %s after the refused download", e.Name())
			}
			t.Logf("refused after %d bytes of gzip: %s", sent.Load(), *s.ErrorMessage)
		})
	}
}
