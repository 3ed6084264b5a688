package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/appliance-sh/appliance/app/config"
)

func TestServerRefusesAnArchiveItCannotBuild(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, archiveWorkspace)
	cfg := testServerConfig(t, map[string]string{"ws": ws}, 0)
	cfg.LogStorage.Archive = &config.Archive{Type: "s3", Bucket: "b", Region: "r", Endpoint: "ftp://host"}
	if _, err := startServer(t.Context(), cfg, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), `log_storage.archive: s3 archive: endpoint "ftp://host"`) {
		t.Fatalf("startServer error = %v; want the endpoint named", err)
	}

	// The failed start released what it had opened: the same data dir starts.
	cfg.LogStorage.Archive = nil
	srv, err := startServer(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start after a failed start: %v", err)
	}
	if err := srv.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

// archiveWorkspace has a task whose success hook writes a _server line
// into the job's log in the batch that ends the job.
const archiveWorkspace = `actions:
  notify:
    type: script
    script: echo notified
tasks:
  greet:
    flow:
      hello:
        type: script
        script: echo "hello from the archive test"
    on_success:
      - action: notify
`

// archivedJob runs greet to completion and returns its id, its log as
// served while the local file exists, and its archive key.
func archivedJob(t *testing.T, f *serverFixture, prefix string) (id, log, key string) {
	t.Helper()
	id = f.execute("ws", "greet", nil)
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	// The engine appends the batch's _server lines just after committing
	// it, so the API may show the job ended a moment before the hook line.
	waitForObject(t, "the hook line in the job log", func() ([]byte, bool) {
		log = f.logs(id, "")
		return nil, strings.Contains(log, `hook \"notify\" started job`)
	})
	if !strings.Contains(log, "hello from the archive test") {
		t.Fatalf("job log lacks the step's line:\n%s", log)
	}
	created := j.CreatedAt.UTC()
	key = prefix + "ws/greet/" + created.Format("2006/01/02/2006-01-02T15-04-05") + "_" + id + ".jsonl.gz"
	return id, log, key
}

// waitForObject polls get until it finds the object, failing after a deadline.
func waitForObject(t *testing.T, what string, get func() ([]byte, bool)) []byte {
	t.Helper()
	var data []byte
	waitUntil(t, what, func() bool {
		var ok bool
		data, ok = get()
		return ok
	})
	return data
}

func gunzip(t *testing.T, gz []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("archived log is not gzip: %v", err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return string(data)
}

// dropLocalLog removes the job's local JSONL file, as log retention would.
func dropLocalLog(t *testing.T, f *serverFixture, id string) {
	t.Helper()
	if err := os.Remove(filepath.Join(f.srv.cfg.LogStorage.LocalDir, id+".jsonl")); err != nil {
		t.Fatal(err)
	}
}

func TestLocalArchiveKeepsTheLogAfterTheLocalFileIsGone(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, archiveWorkspace)
	archiveDir := filepath.Join(t.TempDir(), "archive")
	f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *config.Server) {
		c.LogStorage.Archive = &config.Archive{Type: "local", Path: archiveDir, Prefix: "logs/"}
	})
	id, log, key := archivedJob(t, f, "logs/")

	file := filepath.Join(archiveDir, filepath.FromSlash(key))
	gz := waitForObject(t, file, func() ([]byte, bool) {
		data, err := os.ReadFile(file)
		return data, err == nil
	})
	if got := gunzip(t, gz); got != log {
		t.Fatalf("archived log:\n%s\nwant the served log:\n%s", got, log)
	}

	dropLocalLog(t, f, id)
	if got := f.logs(id, ""); got != log {
		t.Errorf("log served from the archive:\n%s\nwant:\n%s", got, log)
	}
	if got := f.logs(id, "hello"); !strings.Contains(got, "hello from the archive test") || strings.Contains(got, `"_server"`) {
		t.Errorf("step log served from the archive = %q; want only step hello's lines", got)
	}
}

// s3Fixture is gofakes3 on 127.0.0.1 with one bucket; while failing is
// set it refuses every upload, counting them.
type s3Fixture struct {
	url     string
	backend *s3mem.Backend
	mu      sync.Mutex
	failing bool
	refused int
}

func startS3(t *testing.T, bucket string) *s3Fixture {
	t.Helper()
	s := &s3Fixture{backend: s3mem.New()}
	if err := s.backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(s.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		refuse := s.failing && r.Method == http.MethodPut
		if refuse {
			s.refused++
		}
		s.mu.Unlock()
		if refuse {
			// 403 rather than 5xx: minio-go retries 5xx itself, which
			// would hide the archiver's own retries.
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>refused by the test</Message></Error>`)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	s.url = srv.URL
	return s
}

func (s *s3Fixture) object(bucket, key string) ([]byte, bool) {
	obj, err := s.backend.GetObject(bucket, key, nil)
	if err != nil {
		return nil, false
	}
	defer obj.Contents.Close()
	data, err := io.ReadAll(obj.Contents)
	return data, err == nil
}

func (s *s3Fixture) setFailing(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = v
}

func (s *s3Fixture) refusedUploads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func TestS3ArchiveKeepsTheLogAfterTheLocalFileIsGone(t *testing.T) {
	tests := []struct {
		name   string
		config func(c *config.Server, endpoint string)
	}{
		{"archive", func(c *config.Server, endpoint string) {
			c.LogStorage.Archive = &config.Archive{Type: "s3", Bucket: "logs", Region: "us-east-1", Prefix: "appliance/", Endpoint: endpoint}
		}},
		{"legacy s3", func(c *config.Server, endpoint string) {
			c.LogStorage.S3 = &config.LegacyS3{Bucket: "logs", Region: "us-east-1", Prefix: "appliance/", Endpoint: endpoint}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := startS3(t, "logs")
			ws := t.TempDir()
			writeWorkspace(t, ws, archiveWorkspace)
			f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *config.Server) { tt.config(c, s3.url) })
			id, log, key := archivedJob(t, f, "appliance/")

			gz := waitForObject(t, "s3://logs/"+key, func() ([]byte, bool) { return s3.object("logs", key) })
			if got := gunzip(t, gz); got != log {
				t.Fatalf("archived log:\n%s\nwant the served log:\n%s", got, log)
			}
			dropLocalLog(t, f, id)
			if got := f.logs(id, ""); got != log {
				t.Errorf("log served from S3:\n%s\nwant:\n%s", got, log)
			}
		})
	}
}

func TestRefusedUploadsAreRetriedWithoutHoldingUpJobs(t *testing.T) {
	s3 := startS3(t, "logs")
	s3.setFailing(true)
	ws := t.TempDir()
	writeWorkspace(t, ws, archiveWorkspace)
	f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *config.Server) {
		c.LogStorage.Archive = &config.Archive{Type: "s3", Bucket: "logs", Region: "us-east-1", Endpoint: s3.url}
	})
	// Jobs keep running and completing while every upload is refused.
	var keys []string
	for range 3 {
		_, _, key := archivedJob(t, f, "")
		keys = append(keys, key)
	}
	waitForObject(t, "refused uploads", func() ([]byte, bool) { return nil, s3.refusedUploads() >= len(keys) })
	for _, key := range keys {
		if _, ok := s3.object("logs", key); ok {
			t.Fatalf("%s was stored while uploads were refused", key)
		}
	}
	// Once the store accepts uploads again, the retries land every log.
	s3.setFailing(false)
	for _, key := range keys {
		waitForObject(t, "s3://logs/"+key+" after the retry", func() ([]byte, bool) { return s3.object("logs", key) })
	}
}
