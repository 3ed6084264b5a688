package logtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// Jobs is a job lookup for an archive under test: the archive asks only
// for a job's creation time (its key) and whether it has ended.
type Jobs struct {
	mu   sync.Mutex
	jobs map[string]*engine.Job
}

// Add records a job in the given status.
func (j *Jobs) Add(id, status string) *engine.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.jobs == nil {
		j.jobs = map[string]*engine.Job{}
	}
	job := &engine.Job{ID: id, Workspace: "ops", TaskName: "deploy", Status: status, CreatedAt: t0}
	j.jobs[id] = job
	return job
}

// Job implements store.JobLookup.
func (j *Jobs) Job(_ context.Context, id string) (*engine.Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if job, ok := j.jobs[id]; ok {
		cp := *job
		return &cp, nil
	}
	return nil, engine.ErrNotFound
}

// WaitArchived polls the archive until the job's object appears and
// returns it gunzipped.
func WaitArchived(t *testing.T, a store.Archive, key string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gz, err := a.Get(context.Background(), key)
		if err == nil {
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				t.Fatalf("archived %s is not gzip: %v", key, err)
			}
			data, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("gunzip %s: %v", key, err)
			}
			return string(data)
		}
		if !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("Get(%s): %v", key, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never archived", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ArchiveRoundTrip archives a big log of the backend to the archive, has
// the backend remove it, and checks every read and backfill of the
// archived copy against the log as the backend held it.
func ArchiveRoundTrip(t *testing.T, l store.LogBackend, archive store.Archive) {
	t.Helper()
	jobs := &Jobs{}
	a := store.NewArchivingLogs(l, archive, jobs, store.ArchiveOptions{Prefix: "logs/", Backoff: time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Drain(ctx); err != nil {
			t.Errorf("Drain: %v", err)
		}
	})
	job := jobs.Add("j1", engine.JobCompleted)
	sent := BigMixedLog(t, a, "j1")
	a.Finish("j1")
	text := read(t, l, "j1", "")
	checkSent(t, text, sent)
	if got := WaitArchived(t, archive, store.ArchiveKey("logs/", job)); got != text {
		t.Fatalf("archived %d bytes, want the %d of the backend's log", len(got), len(text))
	}
	// The uploader marks the log archived just after the object lands.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := a.State(context.Background(), "j1")
		if err != nil {
			t.Fatal(err)
		}
		if st == store.Archived {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("State = %v, want Archived", st)
		}
	}
	if removed, err := l.Remove("j1"); err != nil || !removed {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	CheckQueries(t, a, "j1", text)
	CheckBackfills(t, a, "j1", text)
}

func testArchive(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	archive, err := store.NewLocalArchive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ArchiveRoundTrip(t, l, archive)
}
