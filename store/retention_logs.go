package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/appliance-sh/appliance/engine"
)

// Remove deletes the job's local log file, if any, (an archived copy stays). It
// waits for an append under way, so no line is written to a file that is
// being removed.
func (l *Logs) Remove(jobID string) (removed bool, err error) {
	if err := validJobID(jobID); err != nil {
		return false, fmt.Errorf("remove log: %w", err)
	}
	jl := l.lock(jobID)
	defer l.release(jobID, jl)
	var errs []error
	for _, p := range []string{l.jsonlPath(jobID), l.legacyPath(jobID)} {
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = true
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return removed, fmt.Errorf("remove log of job %s: %w", jobID, err)
	}
	return removed, nil
}

// appendKeepingTime appends a line to the job's log and puts its file's
// modification time back, so a note about the log does not restart its
// retention.
func (l *Logs) appendKeepingTime(jobID string, line engine.LogLine) error {
	info, err := os.Stat(l.jsonlPath(jobID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a legacy .log file: left as it is
	}
	if err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	if err := l.Append(jobID, []engine.LogLine{line}); err != nil {
		return err
	}
	if err := os.Chtimes(l.jsonlPath(jobID), time.Time{}, info.ModTime()); err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	return nil
}

// LastWrittenBefore lists the jobs whose local log file was last written
// before t. A log is written up to its job's end, so these are the only
// logs an age-based retention can concern; the others are not looked up.
func (l *Logs) LastWrittenBefore(t time.Time) ([]string, error) {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	var ids []string
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, ".jsonl")
		if !ok {
			id, ok = strings.CutSuffix(name, ".log")
		}
		if !ok || !e.Type().IsRegular() || validJobID(id) != nil {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("list logs: %w", err)
		}
		if info.ModTime().Before(t) && (len(ids) == 0 || ids[len(ids)-1] != id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// EndedBefore returns those of ids whose job ended before cutoff (hooks
// no longer pending), or that have no job record any more.
func (db *DB) EndedBefore(ctx context.Context, ids []string, cutoff time.Time) ([]string, error) {
	var out []string
	err := db.view(ctx, func(tx *bolt.Tx) error {
		for _, id := range ids {
			if tx.Bucket(bucketJobs).Get([]byte(id)) == nil {
				out = append(out, id)
				continue
			}
			j, err := decodeSweptJob(tx, id)
			if err != nil {
				return err
			}
			if end, ok := j.ended(); ok && end.Before(cutoff) {
				out = append(out, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find ended jobs: %w", err)
	}
	return out, nil
}
