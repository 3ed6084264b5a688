package store

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/appliance-sh/appliance/engine"
)

// Read returns the job's log like Logs.Read, in the order local JSONL file,
// legacy .log file, then the archive.
func (a *ArchivingLogs) Read(jobID, step string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.Timeout)
	defer cancel()
	return a.ReadContext(ctx, jobID, step)
}

// ReadContext is Read bounded by ctx.
func (a *ArchivingLogs) ReadContext(ctx context.Context, jobID, step string) (string, error) {
	text, err := a.Logs.Read(jobID, step)
	if err != nil || text != "" || a.Logs.hasFile(jobID) {
		return text, err
	}
	data, err := a.fromArchive(ctx, jobID)
	if err != nil {
		return "", fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if step == "" {
		return string(data), nil
	}
	return string(filterStep(data, step)), nil
}

// Subscribe is Logs.Subscribe with the archived log as the backfill of a
// finished job whose local file is gone.
func (a *ArchivingLogs) Subscribe(jobID string) (backfill []byte, updates <-chan []byte, cancel func(), err error) {
	backfill, updates, cancel, err = a.Logs.Subscribe(jobID)
	if err != nil || len(backfill) > 0 || a.Logs.hasFile(jobID) {
		return backfill, updates, cancel, err
	}
	ctx, done := context.WithTimeout(context.Background(), a.opts.Timeout)
	defer done()
	backfill, err = a.fromArchive(ctx, jobID)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("subscribe to log of job %s: %w", jobID, err)
	}
	return backfill, updates, cancel, nil
}

// fromArchive returns a finished job's archived log, or nothing when it
// has none. Jobs still running are not looked for: their log is local or
// not written yet, and an object-store request per poll would be waste.
func (a *ArchivingLogs) fromArchive(ctx context.Context, jobID string) ([]byte, error) {
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
		return nil, err
	}
	return gunzipBytes(gz)
}

// hasFile reports whether the job has a local log file, JSONL or legacy.
func (l *Logs) hasFile(jobID string) bool {
	for _, path := range []string{l.jsonlPath(jobID), l.legacyPath(jobID)} {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}
