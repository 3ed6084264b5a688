package store

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/appliance-sh/appliance/engine"
)

// fakeS3 starts an in-process S3 API on 127.0.0.1 holding the given
// buckets, with credentials for the standard chain in the environment.
func fakeS3(t *testing.T, buckets ...string) (endpoint string) {
	t.Helper()
	backend := s3mem.New()
	for _, b := range buckets {
		if err := backend.CreateBucket(b); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "test-key")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	return srv.URL
}

func s3Archive(t *testing.T, endpoint, bucket string) *S3Archive {
	t.Helper()
	a, err := NewS3Archive(ArchiveConfig{Type: "s3", Bucket: bucket, Region: "us-east-1", Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestS3ArchivePutsAndGetsObjects(t *testing.T) {
	a := s3Archive(t, fakeS3(t, "logs"), "logs")
	ctx := context.Background()
	key := "p/ws/task/2025/03/01/2025-03-01T12-00-00_j1.jsonl.gz"
	if err := a.Put(ctx, key, []byte("gz bytes")); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if got, err := a.Get(ctx, key); err != nil || string(got) != "gz bytes" {
		t.Errorf("Get = %q, %v; want the object", got, err)
	}
	if _, err := a.Get(ctx, "p/ws/task/missing.jsonl.gz"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
}

func TestS3ArchiveReportsAMissingBucketAsAnError(t *testing.T) {
	a := s3Archive(t, fakeS3(t), "nobucket")
	ctx := context.Background()
	if err := a.Put(ctx, "k.gz", []byte("x")); err == nil || !strings.Contains(err.Error(), "s3://nobucket/k.gz") {
		t.Errorf("Put into a missing bucket error = %v; want one naming the object", err)
	}
	if _, err := a.Get(ctx, "k.gz"); err == nil || errors.Is(err, engine.ErrNotFound) {
		t.Errorf("Get from a missing bucket error = %v; want a failure, not a missing log", err)
	}
}

func TestFinishedJobLogIsArchivedToS3AndReadBack(t *testing.T) {
	endpoint := fakeS3(t, "logs")
	f := newArchiveFixture(t, s3Archive(t, endpoint, "logs"), ArchiveOptions{Prefix: "appliance/"})
	job := f.finishJob("j1", engine.JobCompleted, line("build", "compiling"), line(engine.ServerStep, "hook fired"))
	want, _ := f.logs.Read("j1", "")
	if got := f.waitArchived(job, "appliance/"); got != want {
		t.Fatalf("archived log:\n%s\nwant:\n%s", got, want)
	}
	f.removeLocal("j1")
	if got, err := f.arch.Read("j1", engine.ServerStep); err != nil || got != strings.SplitAfter(want, "\n")[1] {
		t.Errorf("Read(_server) from S3 = %q, %v; want the server line", got, err)
	}
}
