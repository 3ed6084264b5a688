package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/appliance-sh/appliance/engine"
)

// ReadLog is the backend's ReadLog falling back to the archive for a
// finished job whose log the backend no longer holds. The archived object
// is fetched whole (it is compressed) and decompressed as it is read, once
// per pass.
func (a *ArchivingLogs) ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error) {
	if ValidJobID(jobID) != nil || a.stored(jobID) {
		return a.LogBackend.ReadLog(ctx, jobID, q, w)
	}
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	gz, err := a.archived(ctx, jobID)
	if err != nil {
		return engine.LogPage{}, fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if gz == nil {
		// Written meanwhile, or never: the local file is the answer.
		return a.LogBackend.ReadLog(ctx, jobID, q, w)
	}
	page, err := readForward(ctx, gzipOpener(gz), q, w)
	if err != nil {
		return page, fmt.Errorf("read archived log of job %s: %w", jobID, err)
	}
	return page, nil
}

// Subscribe is the backend's Subscribe with the archived log as the
// backfill of a finished job whose log the backend no longer holds,
// decompressed as it is read.
func (a *ArchivingLogs) Subscribe(jobID string, q engine.LogQuery) (backfill io.ReadCloser, updates <-chan []byte, cancel func(), err error) {
	backfill, updates, cancel, err = a.LogBackend.Subscribe(jobID, q)
	if err != nil || a.stored(jobID) {
		return backfill, updates, cancel, err
	}
	ctx, done := context.WithTimeout(context.Background(), a.opts.Timeout)
	defer done()
	gz, err := a.archived(ctx, jobID)
	if err != nil || gz == nil {
		if err != nil {
			backfill.Close()
			cancel()
			return nil, nil, nil, fmt.Errorf("subscribe to log of job %s: %w", jobID, err)
		}
		return backfill, updates, cancel, nil
	}
	backfill.Close()
	q.Step = ""
	backfill = PipeRead(context.Background(), func(ctx context.Context, w io.Writer) error {
		_, err := readForward(ctx, gzipOpener(gz), q, w)
		return err
	})
	return backfill, updates, cancel, nil
}

// gzipOpener opens a gzipped log from its start, once per call.
func gzipOpener(gz []byte) func() (io.Reader, error) {
	return func() (io.Reader, error) {
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			return nil, fmt.Errorf("gunzip archived log: %w", err)
		}
		return zr, nil
	}
}

// archived returns a finished job's archived log, still compressed, or nil
// when it has none. Jobs still running are not looked for: their log is
// local or not written yet, and an object-store request per poll would be
// waste.
func (a *ArchivingLogs) archived(ctx context.Context, jobID string) ([]byte, error) {
	job, err := a.jobs.Job(ctx, jobID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up job: %w", err)
	}
	if !job.Terminal() {
		return nil, nil
	}
	gz, err := a.archive.Get(ctx, ArchiveKey(a.opts.Prefix, job))
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the log archive did not answer: %w", engine.ErrUnavailable, err)
	}
	return gz, nil
}

// stored reports whether the backend holds the job's log. An error reading
// it counts as yes: the backend's own read then reports it.
func (a *ArchivingLogs) stored(jobID string) bool {
	_, ok, err := a.LogBackend.Stored(jobID)
	return ok || err != nil
}
