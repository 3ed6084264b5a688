package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

// JobLookup finds a job by id (engine.ErrNotFound); *DB implements it.
type JobLookup interface {
	Job(ctx context.Context, id string) (*engine.Job, error)
}

// ArchiveOptions tune an ArchivingLogs; zero values take the defaults.
type ArchiveOptions struct {
	Prefix   string        // key prefix, see ArchiveKey
	Workers  int           // concurrent uploads (default 4)
	Queue    int           // jobs waiting for an upload slot (default 4096)
	Attempts int           // tries per upload (default 5)
	Backoff  time.Duration // wait before the first retry, doubled after each (default 1s)
	Timeout  time.Duration // per attempt, and per archive read (default 1m)
	Logger   *slog.Logger  // nil = slog.Default()
}

func (o *ArchiveOptions) setDefaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Queue <= 0 {
		o.Queue = 4096
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// ArchivingLogs is a log backend plus an archive: Finish queues the
// finished job's log for upload, and reads of a job whose log the backend
// no longer holds fall back to the archive. Uploads run on a few background goroutines, so the orchestrator
// calling Finish never waits for the network.
type ArchivingLogs struct {
	LogBackend
	archive Archive
	jobs    JobLookup
	opts    ArchiveOptions

	mu     sync.RWMutex // guards closed against sends on the closed queue
	closed bool
	queue  chan string
	// uploadCtx ends the uploads still running when Drain runs out of time.
	uploadCtx    context.Context
	cancelUpload context.CancelFunc
	uploads      sync.WaitGroup

	// finished holds the last recentFinished jobs handed to Finish, in
	// finishedRing, for Append to tell late lines.
	finishedMu   sync.Mutex
	finished     map[string]struct{}
	finishedRing []string
	finishedNext int
	// inflight holds the jobs being uploaded; true means queued again
	// meanwhile, so the uploader goes once more with the newer log.
	inflight map[string]bool
	// unarchived holds the jobs whose upload is queued, running or has
	// failed (true), so retention keeps their local log; an upload that
	// succeeds drops its job.
	unarchived map[string]bool
}

// recentFinished is how many finished jobs Append watches for late lines.
const recentFinished = 1024

var _ engine.LogSink = (*ArchivingLogs)(nil)

// NewArchivingLogs archives logs' finished jobs to archive, looking their
// keys up through jobs, and starts the upload workers; Drain or Close stops
// them.
func NewArchivingLogs(logs LogBackend, archive Archive, jobs JobLookup, opts ArchiveOptions) *ArchivingLogs {
	opts.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	a := &ArchivingLogs{LogBackend: logs, archive: archive, jobs: jobs, opts: opts,
		queue: make(chan string, opts.Queue), uploadCtx: ctx, cancelUpload: cancel,
		finished: make(map[string]struct{}, recentFinished), finishedRing: make([]string, recentFinished),
		inflight: make(map[string]bool), unarchived: make(map[string]bool)}
	for range opts.Workers {
		a.uploads.Go(func() {
			for id := range a.queue {
				a.uploadLatest(id)
			}
		})
	}
	return a
}

// Finish ends the job's live subscriptions and queues its log for upload.
// The engine calls it after committing the batch that ended the job and
// appending that batch's _server lines, hook lines included, so the upload
// holds them. A full queue drops the upload with an error rather than
// stall the orchestrator.
func (a *ArchivingLogs) Finish(jobID string) {
	a.LogBackend.Finish(jobID)
	a.remember(jobID)
	a.enqueue(jobID)
}

// Append writes like Logs.Append. Lines can still reach a job after it
// ended (a failed hook job's report, a late worker push): for a job
// finished recently they queue it again, so its archive catches up.
func (a *ArchivingLogs) Append(jobID string, lines []engine.LogLine) error {
	if err := a.LogBackend.Append(jobID, lines); err != nil {
		return err
	}
	a.caughtUp(jobID, lines)
	return nil
}

// AppendRun writes like Logs.AppendRun, and queues a job finished
// recently again as Append does.
func (a *ArchivingLogs) AppendRun(jobID, step, run string, lines []engine.LogLine) error {
	if err := a.LogBackend.AppendRun(jobID, step, run, lines); err != nil {
		return err
	}
	a.caughtUp(jobID, lines)
	return nil
}

// caughtUp queues the job's log for upload again if the job finished
// recently and lines reached it.
func (a *ArchivingLogs) caughtUp(jobID string, lines []engine.LogLine) {
	a.finishedMu.Lock()
	_, finished := a.finished[jobID]
	a.finishedMu.Unlock()
	if finished && len(lines) > 0 {
		a.enqueue(jobID)
	}
}

// remember adds a job to the recently finished ones, forgetting the oldest
// beyond recentFinished.
func (a *ArchivingLogs) remember(jobID string) {
	a.finishedMu.Lock()
	defer a.finishedMu.Unlock()
	if _, ok := a.finished[jobID]; ok {
		return
	}
	if old := a.finishedRing[a.finishedNext]; old != "" {
		delete(a.finished, old)
	}
	a.finishedRing[a.finishedNext] = jobID
	a.finishedNext = (a.finishedNext + 1) % len(a.finishedRing)
	a.finished[jobID] = struct{}{}
}

func (a *ArchivingLogs) enqueue(jobID string) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		a.opts.Logger.Error("job log not archived: the archiver is shut down", "job", jobID)
		a.setUnarchived(jobID, true)
		return
	}
	a.setUnarchived(jobID, false)
	select {
	case a.queue <- jobID:
	default:
		a.opts.Logger.Error("job log not archived: upload queue full", "job", jobID, "queue", a.opts.Queue)
		a.setUnarchived(jobID, true)
	}
}

// setUnarchived marks the job's log as not (yet) in the archive: failed
// says no upload is on its way.
func (a *ArchivingLogs) setUnarchived(jobID string, failed bool) {
	a.finishedMu.Lock()
	a.unarchived[jobID] = failed
	a.finishedMu.Unlock()
}

// ArchiveState is where a job's log stands with the archive, for retention.
type ArchiveState int

const (
	// Archived: the archive holds the log; the local file may go.
	Archived ArchiveState = iota
	// UploadPending: an upload is queued or running.
	UploadPending
	// UploadFailed: the archive does not hold the log and no upload is on
	// its way (it failed, or the server restarted); Reupload queues one.
	UploadFailed
)

// State says whether the archive holds the job's log. A job this process
// has not queued (it finished before a restart) is looked up in the
// archive. A job with no record, or whose log is empty, has nothing the
// archive could hold, so it counts as archived.
func (a *ArchivingLogs) State(ctx context.Context, jobID string) (ArchiveState, error) {
	a.finishedMu.Lock()
	failed, known := a.unarchived[jobID]
	a.finishedMu.Unlock()
	if known && !failed {
		return UploadPending, nil
	}
	job, err := a.jobs.Job(ctx, jobID)
	if errors.Is(err, engine.ErrNotFound) {
		return Archived, nil
	}
	if err != nil {
		return 0, fmt.Errorf("look up job: %w", err)
	}
	if failed {
		return UploadFailed, nil
	}
	size, _, err := a.LogBackend.Stored(jobID)
	if err != nil {
		return 0, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if size == 0 {
		return Archived, nil
	}
	if _, err := a.archive.Get(ctx, ArchiveKey(a.opts.Prefix, job)); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return UploadFailed, nil
		}
		return 0, fmt.Errorf("look up archived log of job %s: %w", jobID, err)
	}
	return Archived, nil
}

// Reupload queues the job's log for upload again.
func (a *ArchivingLogs) Reupload(jobID string) { a.enqueue(jobID) }

// Drain stops taking uploads and waits for the queued and running ones;
// when ctx ends first it cancels them and says how many were cut short.
func (a *ArchivingLogs) Drain(ctx context.Context) error {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	done := make(chan struct{})
	go func() {
		a.uploads.Wait()
		close(done)
	}()
	select {
	case <-done:
		a.cancelUpload()
		return nil
	case <-ctx.Done():
		pending := len(a.queue)
		a.cancelUpload()
		<-done // each running upload returns promptly once cancelled
		return fmt.Errorf("drain log archive: %d queued upload(s) and the running ones abandoned: %w", pending, ctx.Err())
	}
}

// Close drains the uploads for at most a minute, then closes the logs.
func (a *ArchivingLogs) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return errors.Join(a.Drain(ctx), a.LogBackend.Close())
}

// uploadLatest uploads a job's log, one upload per job at a time: two at
// once could land the older log last.
func (a *ArchivingLogs) uploadLatest(jobID string) {
	a.finishedMu.Lock()
	if _, busy := a.inflight[jobID]; busy {
		a.inflight[jobID] = true
		a.finishedMu.Unlock()
		return
	}
	for {
		a.inflight[jobID] = false
		a.finishedMu.Unlock()
		a.upload(jobID)
		a.finishedMu.Lock()
		if !a.inflight[jobID] {
			delete(a.inflight, jobID)
			a.finishedMu.Unlock()
			return
		}
	}
}

// upload archives one job's log, retrying with backoff.
func (a *ArchivingLogs) upload(jobID string) {
	wait := a.opts.Backoff
	var err error
	for attempt := 1; attempt <= a.opts.Attempts; attempt++ {
		var retry bool
		if retry, err = a.archiveJob(jobID); err == nil || !retry {
			break
		}
		if attempt == a.opts.Attempts {
			break
		}
		a.opts.Logger.Warn("archive job log failed; retrying", "job", jobID, "attempt", attempt, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-a.uploadCtx.Done():
		}
		if a.uploadCtx.Err() != nil {
			break
		}
		wait *= 2
	}
	if err != nil {
		a.opts.Logger.Error("archive job log failed", "job", jobID, "err", err, "local_log", "kept until an upload succeeds")
		a.setUnarchived(jobID, true)
		return
	}
	a.finishedMu.Lock()
	if !a.inflight[jobID] { // not queued again meanwhile
		delete(a.unarchived, jobID)
	}
	a.finishedMu.Unlock()
}

// archiveJob uploads the log; retry says whether a failure may pass.
func (a *ArchivingLogs) archiveJob(jobID string) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(a.uploadCtx, a.opts.Timeout)
	defer cancel()
	job, err := a.jobs.Job(ctx, jobID)
	if err != nil {
		return !errors.Is(err, engine.ErrNotFound), fmt.Errorf("look up job: %w", err)
	}
	size, _, err := a.LogBackend.Stored(jobID)
	if err != nil {
		return true, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if size == 0 {
		return false, nil // a job that never logged (skipped) has nothing to keep
	}
	// Compressed as it is read: only the compressed log is held in memory.
	gz, err := gzipRead(func(w io.Writer) error {
		_, err := a.LogBackend.ReadLog(ctx, jobID, engine.LogQuery{}, w)
		return err
	})
	if err != nil {
		return true, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if err := a.archive.Put(ctx, ArchiveKey(a.opts.Prefix, job), gz); err != nil {
		return !errors.Is(err, engine.ErrInvalid), err
	}
	return false, nil
}

func gzipFrom(r io.Reader) ([]byte, error) {
	return gzipRead(func(w io.Writer) error {
		_, err := io.Copy(w, r)
		return err
	})
}

// gzipRead compresses what read writes.
func gzipRead(read func(w io.Writer) error) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := read(zw); err != nil {
		return nil, fmt.Errorf("gzip log: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip log: %w", err)
	}
	return buf.Bytes(), nil
}
