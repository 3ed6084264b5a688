package app

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
)

func TestArchiveConfig(t *testing.T) {
	cases := []struct {
		name, yaml, wantErr, want string // want: describeArchive of a valid config
	}{
		{name: "none", yaml: "log_storage: {local_dir: /l}\n", want: "off"},
		{name: "local", yaml: "log_storage:\n  archive: {type: local, path: /srv/archive}\n", want: `local /srv/archive (prefix "")`},
		{name: "s3 on aws", yaml: "log_storage:\n  archive: {type: s3, bucket: logs, region: eu-west-1, prefix: appliance/}\n",
			want: `s3 bucket logs, region eu-west-1, endpoint aws (prefix "appliance/")`},
		{name: "s3 compatible", yaml: "log_storage:\n  archive: {type: s3, bucket: logs, region: us-east-1, endpoint: 'http://minio:9000'}\n",
			want: `s3 bucket logs, region us-east-1, endpoint http://minio:9000 (prefix "")`},
		{name: "legacy s3", yaml: "log_storage:\n  s3: {bucket: old, region: us-west-2, prefix: x/}\n",
			want: `s3 bucket old, region us-west-2, endpoint aws (prefix "x/")`},
		{name: "archive wins over legacy s3", yaml: "log_storage:\n  archive: {type: local, path: /a}\n  s3: {bucket: old, region: us-west-2}\n",
			want: `local /a (prefix "")`},
		{name: "missing type", yaml: "log_storage:\n  archive: {path: /a}\n", wantErr: "log_storage.archive.type: required (s3 or local)"},
		{name: "unknown type", yaml: "log_storage:\n  archive: {type: gcs, bucket: b}\n", wantErr: `log_storage.archive.type: unsupported type "gcs" (supported: s3, local)`},
		{name: "s3 without bucket", yaml: "log_storage:\n  archive: {type: s3, region: r}\n", wantErr: "log_storage.archive.bucket: required for type s3"},
		{name: "s3 without region", yaml: "log_storage:\n  archive: {type: s3, bucket: b}\n", wantErr: "log_storage.archive.region: required for type s3"},
		{name: "s3 with a path", yaml: "log_storage:\n  archive: {type: s3, bucket: b, region: r, path: /a}\n", wantErr: "log_storage.archive.path: not used by type s3"},
		{name: "local without path", yaml: "log_storage:\n  archive: {type: local}\n", wantErr: "log_storage.archive.path: required for type local"},
		{name: "local with a bucket", yaml: "log_storage:\n  archive: {type: local, path: /a, bucket: b}\n", wantErr: "log_storage.archive.bucket: not used by type local"},
		{name: "legacy without bucket", yaml: "log_storage:\n  s3: {region: r}\n", wantErr: "log_storage.s3.bucket: required for type s3"},
		{name: "legacy has no type", yaml: "log_storage:\n  s3: {type: s3, bucket: b, region: r}\n", wantErr: `:2:8: unknown field "type"`},
		{name: "unknown archive key", yaml: "log_storage:\n  archive:\n    type: local\n    paht: /a\n", wantErr: ":4:5: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfigText(t, c.yaml)
			if configErrorChecked(t, err, c.wantErr) {
				return
			}
			if got := cfg.LogStorage.describeArchive(); got != c.want {
				t.Errorf("archive = %s, want %s", got, c.want)
			}
		})
	}
}

func TestServerRefusesAnArchiveItCannotBuild(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, archiveWorkspace)
	cfg := testServerConfig(t, map[string]string{"ws": ws}, 0)
	cfg.LogStorage.Archive = &ArchiveConfig{Type: "s3", Bucket: "b", Region: "r", Endpoint: "ftp://host"}
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
	f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *ServerConfig) {
		c.LogStorage.Archive = &ArchiveConfig{Type: "local", Path: archiveDir, Prefix: "logs/"}
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
		config func(c *ServerConfig, endpoint string)
	}{
		{"archive", func(c *ServerConfig, endpoint string) {
			c.LogStorage.Archive = &ArchiveConfig{Type: "s3", Bucket: "logs", Region: "us-east-1", Prefix: "appliance/", Endpoint: endpoint}
		}},
		{"legacy s3", func(c *ServerConfig, endpoint string) {
			c.LogStorage.S3 = &LegacyS3Config{Bucket: "logs", Region: "us-east-1", Prefix: "appliance/", Endpoint: endpoint}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s3 := startS3(t, "logs")
			ws := t.TempDir()
			writeWorkspace(t, ws, archiveWorkspace)
			f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *ServerConfig) { tt.config(c, s3.url) })
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
	f := startFixture(t, map[string]string{"ws": ws}, 2, func(c *ServerConfig) {
		c.LogStorage.Archive = &ArchiveConfig{Type: "s3", Bucket: "logs", Region: "us-east-1", Endpoint: s3.url}
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
