package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// archiveFixture is a real bbolt store and log dir wired to an archive.
type archiveFixture struct {
	t    *testing.T
	db   *DB
	logs *Logs
	arch *ArchivingLogs
	raw  Archive
}

func newArchiveFixture(t *testing.T, archive Archive, opts ArchiveOptions) *archiveFixture {
	t.Helper()
	db, _ := openTemp(t)
	logs := openLogs(t)
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	a := NewArchivingLogs(logs, archive, db, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Drain(ctx); err != nil {
			t.Errorf("Drain: %v", err)
		}
	})
	return &archiveFixture{t: t, db: db, logs: logs, arch: a, raw: archive}
}

// finishJob commits a job in the given status, logs lines for it (none
// when lines is empty) and reports it finished, as the engine does.
func (f *archiveFixture) finishJob(id, status string, lines ...engine.LogLine) *engine.Job {
	f.t.Helper()
	job := newJob(id, "ops", "deploy", 0)
	job.Status = status
	commit(f.t, f.db, &engine.Batch{Jobs: []*engine.Job{job}})
	if len(lines) > 0 {
		if err := f.arch.Append(id, lines); err != nil {
			f.t.Fatalf("Append: %v", err)
		}
	}
	f.arch.Finish(id)
	return job
}

// waitArchived polls the archive until the job's object appears and
// returns it gunzipped.
func (f *archiveFixture) waitArchived(job *engine.Job, prefix string) string {
	f.t.Helper()
	key := ArchiveKey(prefix, job)
	deadline := time.Now().Add(10 * time.Second)
	for {
		gz, err := f.raw.Get(context.Background(), key)
		if err == nil {
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				f.t.Fatalf("archived %s is not gzip: %v", key, err)
			}
			data, err := io.ReadAll(zr)
			if err != nil {
				f.t.Fatalf("gunzip %s: %v", key, err)
			}
			return string(data)
		}
		if !errors.Is(err, engine.ErrNotFound) {
			f.t.Fatalf("Get(%s): %v", key, err)
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s: %s never archived", job.ID, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeLocal deletes the job's local JSONL file, as retention would.
func (f *archiveFixture) removeLocal(id string) {
	f.t.Helper()
	if err := os.Remove(f.logs.jsonlPath(id)); err != nil {
		f.t.Fatal(err)
	}
}

func localArchive(t *testing.T) *LocalArchive {
	t.Helper()
	a, err := NewLocalArchive(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestFinishedJobLogIsArchivedAndReadBackOnceTheLocalFileIsGone(t *testing.T) {
	f := newArchiveFixture(t, localArchive(t), ArchiveOptions{Prefix: "logs/"})
	job := f.finishJob("j1", engine.JobCompleted, line("build", "compiling"), line(engine.ServerStep, "hook fired"))
	want, err := f.logs.Read("j1", "")
	if err != nil || want == "" {
		t.Fatalf("local log = %q, %v", want, err)
	}
	if got := f.waitArchived(job, "logs/"); got != want {
		t.Fatalf("archived log:\n%s\nwant:\n%s", got, want)
	}

	f.removeLocal("j1")
	if got, err := f.arch.Read("j1", ""); err != nil || got != want {
		t.Errorf("Read after removal = %q, %v; want the archived log", got, err)
	}
	if got, err := f.arch.Read("j1", "build"); err != nil || got != strings.SplitAfter(want, "\n")[0] {
		t.Errorf("Read(build) after removal = %q, %v; want its one line", got, err)
	}
	backfill, _, cancel, err := f.arch.Subscribe("j1", engine.LogQuery{})
	if err != nil {
		t.Fatalf("Subscribe after removal: %v", err)
	}
	got, err := io.ReadAll(backfill)
	backfill.Close()
	if err != nil || string(got) != want {
		t.Errorf("Subscribe backfill after removal = %q, %v; want the archived log", got, err)
	}
	if cancel != nil {
		cancel()
	}
}

func TestReadsPreferTheLocalFilesOverTheArchive(t *testing.T) {
	raw := localArchive(t)
	f := newArchiveFixture(t, raw, ArchiveOptions{})
	job := f.finishJob("j1", engine.JobFailed, line("a", "local"))
	f.waitArchived(job, "")
	// A different archived copy shows which source a read used.
	gz, _ := gzipFrom(strings.NewReader(`{"ts":"2025-03-01T12:00:00Z","stream":"stdout","step":"a","line":"archived"}` + "\n"))
	if err := raw.Put(context.Background(), ArchiveKey("", job), gz); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.arch.Read("j1", ""); !strings.Contains(got, `"local"`) {
		t.Errorf("with the JSONL file: Read = %q; want the local file", got)
	}
	// A step with no lines is an empty answer from the local file, not an
	// archive lookup.
	if got, _ := f.arch.Read("j1", "b"); got != "" {
		t.Errorf("Read(step b) = %q; want empty", got)
	}
	f.removeLocal("j1")
	legacy := `{"ts":"2024-01-01T00:00:00Z","stream":"stdout","step":"a","line":"legacy"}` + "\n"
	if err := os.WriteFile(f.logs.legacyPath("j1"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.arch.Read("j1", ""); got != legacy {
		t.Errorf("with the legacy file: Read = %q; want the legacy file", got)
	}
	os.Remove(f.logs.legacyPath("j1"))
	if got, _ := f.arch.Read("j1", ""); !strings.Contains(got, `"archived"`) {
		t.Errorf("with no local file: Read = %q; want the archive", got)
	}
}

func TestJobsWithoutLogOrUnknownReadEmptyAndUploadNothing(t *testing.T) {
	rec := &recordingArchive{}
	f := newArchiveFixture(t, rec, ArchiveOptions{})
	f.finishJob("skipped", engine.JobSkipped)
	f.arch.Finish("ghost") // not in the store
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Drain waits for the queued uploads, so afterwards nothing is pending.
	if err := f.arch.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if puts := rec.putCount(); puts != 0 {
		t.Errorf("%d uploads; want none for a job with no log", puts)
	}
	for _, id := range []string{"skipped", "ghost"} {
		if got, err := f.arch.Read(id, ""); err != nil || got != "" {
			t.Errorf("Read(%s) = %q, %v; want empty", id, got, err)
		}
	}
	if gets := rec.getCount(); gets != 1 {
		t.Errorf("%d archive reads; want 1 (the finished job without local file, not the unknown one)", gets)
	}
}

func TestRunningJobWithoutLogDoesNotReadTheArchive(t *testing.T) {
	rec := &recordingArchive{}
	f := newArchiveFixture(t, rec, ArchiveOptions{})
	job := newJob("j1", "ops", "deploy", 0)
	job.Status = engine.JobRunning
	commit(t, f.db, &engine.Batch{Jobs: []*engine.Job{job}})
	if got, err := f.arch.Read("j1", ""); err != nil || got != "" {
		t.Errorf("Read = %q, %v; want empty", got, err)
	}
	if gets := rec.getCount(); gets != 0 {
		t.Errorf("%d archive reads for a running job; want 0", gets)
	}
}

func TestFailedUploadIsRetriedThenSucceeds(t *testing.T) {
	logBuf := &syncBuffer{}
	flaky := &recordingArchive{failPuts: 2}
	f := newArchiveFixture(t, flaky, ArchiveOptions{Logger: slog.New(slog.NewTextHandler(logBuf, nil))})
	job := f.finishJob("j1", engine.JobCompleted, line("a", "x"))
	f.waitArchived(job, "")
	if puts := flaky.putCount(); puts != 3 {
		t.Errorf("%d upload attempts; want 3 (two failures, one success)", puts)
	}
	if got := strings.Count(logBuf.String(), "archive job log failed; retrying"); got != 2 {
		t.Errorf("log has %d retry warnings; want 2:\n%s", got, logBuf)
	}
	if strings.Contains(logBuf.String(), "level=ERROR") {
		t.Errorf("an upload that succeeded logged an error:\n%s", logBuf)
	}
}

func TestUploadThatKeepsFailingIsLoggedAsAnError(t *testing.T) {
	logBuf := &syncBuffer{}
	broken := &recordingArchive{failPuts: 1 << 30}
	f := newArchiveFixture(t, broken, ArchiveOptions{Attempts: 3, Logger: slog.New(slog.NewTextHandler(logBuf, nil))})
	f.finishJob("j1", engine.JobFailed, line("a", "x"))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logBuf.String(), "level=ERROR") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged after the last attempt:\n%s", logBuf)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out := logBuf.String()
	if !strings.Contains(out, `msg="archive job log failed" job=j1`) || !strings.Contains(out, "storage unavailable") {
		t.Errorf("error line does not name the job and the cause:\n%s", out)
	}
	if puts := broken.putCount(); puts != 3 {
		t.Errorf("%d attempts; want 3", puts)
	}
}

func TestFinishNeverWaitsForTheArchive(t *testing.T) {
	logBuf := &syncBuffer{}
	stuck := &recordingArchive{block: make(chan struct{})}
	f := newArchiveFixture(t, stuck, ArchiveOptions{Workers: 1, Queue: 2, Logger: slog.New(slog.NewTextHandler(logBuf, nil))})
	defer close(stuck.block) // lets the cleanup's Drain finish
	// One upload blocks its worker, two fill the queue, the rest overflow:
	// every Finish must still return at once.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, id := range []string{"j1", "j2", "j3", "j4", "j5"} {
			f.finishJob(id, engine.JobCompleted, line("a", id))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Finish blocked on a stuck archive")
	}
	if !strings.Contains(logBuf.String(), "upload queue full") {
		t.Errorf("an overflowing upload was not reported:\n%s", logBuf)
	}
}

func TestDrainGivesUpOnStuckUploadsAtItsDeadline(t *testing.T) {
	stuck := &recordingArchive{block: make(chan struct{})}
	defer close(stuck.block)
	db, _ := openTemp(t)
	a := NewArchivingLogs(openLogs(t), stuck, db, ArchiveOptions{Workers: 1})
	job := newJob("j1", "ops", "deploy", 0)
	job.Status = engine.JobCompleted
	commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
	a.Append("j1", []engine.LogLine{line("a", "x")})
	a.Finish("j1")
	stuck.waitPut(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain = %v; want DeadlineExceeded", err)
	}
}

// recordingArchive is an in-memory archive that can fail or block Puts.
type recordingArchive struct {
	mu       sync.Mutex
	objects  map[string][]byte
	puts     int
	gets     int
	failPuts int           // this many Puts fail first
	block    chan struct{} // when set, Put waits for it or its context
	started  chan struct{}
}

func (r *recordingArchive) Put(ctx context.Context, key string, gz []byte) error {
	r.mu.Lock()
	r.puts++
	fail := r.puts <= r.failPuts
	if r.started == nil {
		r.started = make(chan struct{}, 100)
	}
	started := r.started
	r.mu.Unlock()
	started <- struct{}{}
	if r.block != nil {
		select {
		case <-r.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("storage unavailable")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.objects == nil {
		r.objects = map[string][]byte{}
	}
	r.objects[key] = gz
	return nil
}

func (r *recordingArchive) Get(ctx context.Context, key string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets++
	if gz, ok := r.objects[key]; ok {
		return gz, nil
	}
	return nil, engine.ErrNotFound
}

func (r *recordingArchive) putCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.puts
}

func (r *recordingArchive) getCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets
}

// waitPut waits until a Put has started.
func (r *recordingArchive) waitPut(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.putCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no upload started")
		}
		time.Sleep(time.Millisecond)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLinesAppendedAfterTheJobEndedReachTheArchive(t *testing.T) {
	f := newArchiveFixture(t, localArchive(t), ArchiveOptions{})
	job := f.finishJob("j1", engine.JobCompleted, line("a", "step line"))
	f.waitArchived(job, "")
	// A failed hook job reports into the log of the job that fired it,
	// after that job was archived.
	if err := f.arch.Append("j1", []engine.LogLine{line(engine.ServerStep, "hook job h1 (notify) failed")}); err != nil {
		t.Fatal(err)
	}
	want, _ := f.logs.Read("j1", "")
	deadline := time.Now().Add(10 * time.Second)
	for f.waitArchived(job, "") != want {
		if time.Now().After(deadline) {
			t.Fatalf("archive never caught up with the late line; want:\n%s", want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestDrainWaitsForQueuedUploads(t *testing.T) {
	slow := &recordingArchive{block: make(chan struct{})}
	db, _ := openTemp(t)
	a := NewArchivingLogs(openLogs(t), slow, db, ArchiveOptions{Workers: 1})
	for _, id := range []string{"j1", "j2"} {
		job := newJob(id, "ops", "deploy", 0)
		job.Status = engine.JobCompleted
		commit(t, db, &engine.Batch{Jobs: []*engine.Job{job}})
		if err := a.Append(id, []engine.LogLine{line("a", id)}); err != nil {
			t.Fatal(err)
		}
		a.Finish(id)
	}
	slow.waitPut(t) // j1 uploads, j2 waits in the queue
	drained := make(chan error, 1)
	go func() { drained <- a.Drain(context.Background()) }()
	close(slow.block)
	if err := <-drained; err != nil {
		t.Fatalf("Drain: %v", err)
	}
	for _, id := range []string{"j1", "j2"} {
		job, _ := db.Job(context.Background(), id)
		if _, err := slow.Get(context.Background(), ArchiveKey("", job)); err != nil {
			t.Errorf("%s not archived when Drain returned: %v", id, err)
		}
	}
	a.Finish("j3") // after Drain: logged and dropped, never a panic
}

// unansweringArchive stores uploads but fails every read, as an archive
// that is down does.
type unansweringArchive struct{ Archive }

func (unansweringArchive) Get(context.Context, string) ([]byte, error) {
	return nil, errors.New("connection refused")
}

// A log whose only copy is in an archive that does not answer is
// unavailable (a 503 for the API, which a retry may cure), not a server
// failure (a 500).
func TestAnArchiveThatDoesNotAnswerMakesTheLogUnavailable(t *testing.T) {
	f := newArchiveFixture(t, unansweringArchive{localArchive(t)}, ArchiveOptions{})
	f.finishJob("j1", engine.JobCompleted, line("build", "compiling"))
	f.removeLocal("j1")
	if _, err := f.arch.ReadLog(context.Background(), "j1", engine.LogQuery{}, io.Discard); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("ReadLog = %v, want ErrUnavailable", err)
	}
	if _, _, _, err := f.arch.Subscribe("j1", engine.LogQuery{}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Subscribe = %v, want ErrUnavailable", err)
	}
}
