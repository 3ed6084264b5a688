package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func TestArchiveKeyUsesThePrefixAndTheCreationTimeInUTC(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	job := &engine.Job{ID: "abc-123", Workspace: "ops", TaskName: "deploy",
		// 2025-03-02 08:04:05 in Tokyo is the day before in UTC.
		CreatedAt: time.Date(2025, 3, 2, 8, 4, 5, 999, tokyo)}
	tests := []struct{ prefix, want string }{
		{"", "ops/deploy/2025/03/01/2025-03-01T23-04-05_abc-123.jsonl.gz"},
		{"logs/", "logs/ops/deploy/2025/03/01/2025-03-01T23-04-05_abc-123.jsonl.gz"},
		{"team-", "team-ops/deploy/2025/03/01/2025-03-01T23-04-05_abc-123.jsonl.gz"},
	}
	for _, tt := range tests {
		if got := ArchiveKey(tt.prefix, job); got != tt.want {
			t.Errorf("ArchiveKey(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

func TestArchiveKeysThatCouldEscapeAreRefused(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"ws/task/2025/03/01/x.jsonl.gz", true},
		{"", false},
		{"/etc/passwd", false},
		{"ws/../../etc/passwd", false},
		{"ws//task", false},
		{"./ws", false},
		{"ws\\task", false},
		{"ws/\x00", false},
	}
	for _, tt := range tests {
		err := checkArchiveKey(tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("checkArchiveKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
		}
		if err != nil && !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("checkArchiveKey(%q) = %v, want ErrInvalid", tt.key, err)
		}
	}
}

func TestNewArchiveChoosesTheBackendByType(t *testing.T) {
	tests := []struct {
		cfg     ArchiveConfig
		want    string // type of the backend, or the error
		wantErr bool
	}{
		{cfg: ArchiveConfig{Type: "local", Path: t.TempDir()}, want: "*store.LocalArchive"},
		{cfg: ArchiveConfig{Type: "s3", Bucket: "logs", Region: "eu-west-1"}, want: "*store.S3Archive"},
		{cfg: ArchiveConfig{Type: "s3", Bucket: "logs", Endpoint: "http://127.0.0.1:9000"}, want: "*store.S3Archive"},
		{cfg: ArchiveConfig{Type: "gcs"}, want: `archive type "gcs" is not supported`, wantErr: true},
		{cfg: ArchiveConfig{Type: "local"}, want: "path is required", wantErr: true},
		{cfg: ArchiveConfig{Type: "s3"}, want: "bucket is required", wantErr: true},
		{cfg: ArchiveConfig{Type: "s3", Bucket: "b", Endpoint: "ftp://host"}, want: "scheme must be http or https", wantErr: true},
		{cfg: ArchiveConfig{Type: "s3", Bucket: "b", Endpoint: "http://host/path"}, want: "host[:port] only", wantErr: true},
	}
	for _, tt := range tests {
		a, err := NewArchive(tt.cfg)
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("NewArchive(%+v) error = %v, want ErrInvalid containing %q", tt.cfg, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("NewArchive(%+v): %v", tt.cfg, err)
			continue
		}
		if got := typeName(a); got != tt.want {
			t.Errorf("NewArchive(%+v) = %s, want %s", tt.cfg, got, tt.want)
		}
	}
}

func typeName(a Archive) string {
	switch a.(type) {
	case *LocalArchive:
		return "*store.LocalArchive"
	case *S3Archive:
		return "*store.S3Archive"
	}
	return "unknown"
}

func TestParseS3EndpointTellsTLSFromTheScheme(t *testing.T) {
	tests := []struct {
		endpoint, host string
		secure         bool
	}{
		{"", "s3.amazonaws.com", true},
		{"minio.internal:9000", "minio.internal:9000", true},
		{"https://minio.internal", "minio.internal", true},
		{"http://127.0.0.1:9000", "127.0.0.1:9000", false},
		{"http://127.0.0.1:9000/", "127.0.0.1:9000", false},
	}
	for _, tt := range tests {
		host, secure, err := parseS3Endpoint(tt.endpoint)
		if err != nil || host != tt.host || secure != tt.secure {
			t.Errorf("parseS3Endpoint(%q) = %q, %v, %v; want %q, %v", tt.endpoint, host, secure, err, tt.host, tt.secure)
		}
	}
}

func TestLocalArchiveMapsKeysToSubdirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "archive")
	a, err := NewLocalArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "p/ws/task/2025/03/01/2025-03-01T12-00-00_j1.jsonl.gz"
	if err := a.Put(ctx, key, []byte("first")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	// A second Put replaces the object whole.
	if err := a.Put(ctx, key, []byte("second")); err != nil {
		t.Fatalf("Put again: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "p", "ws", "task", "2025", "03", "01", "2025-03-01T12-00-00_j1.jsonl.gz"))
	if err != nil || string(raw) != "second" {
		t.Fatalf("file under the key path = %q, %v; want second", raw, err)
	}
	got, err := a.Get(ctx, key)
	if err != nil || string(got) != "second" {
		t.Errorf("Get = %q, %v; want second", got, err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "p", "ws", "task", "2025", "03", "01"))
	if err != nil || len(entries) != 1 {
		t.Errorf("key directory holds %v (%v); want only the object, no temp file", entries, err)
	}
	if _, err := a.Get(ctx, "p/ws/task/missing.jsonl.gz"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
	if err := a.Put(ctx, "../escape.gz", []byte("x")); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("Put(../escape.gz) error = %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.gz")); err == nil {
		t.Error("Put(../escape.gz) wrote outside the archive")
	}
}
