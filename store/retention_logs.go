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

// Remove deletes the job's local log file, if any, (an archived copy stays)
// and its runs' marks. It waits for an append under way, so no line is
// written to a file that is being removed.
func (l *Logs) Remove(jobID string) (removed bool, err error) {
	if err := ValidJobID(jobID); err != nil {
		return false, fmt.Errorf("remove log: %w", err)
	}
	err = l.Locked(jobID, func() error {
		var errs []error
		for i, p := range []string{l.jsonlPath(jobID), l.legacyPath(jobID), l.marksPath(jobID), l.marksPath(jobID) + ".tmp"} {
			err := os.Remove(p)
			switch {
			case err == nil:
				removed = removed || i < 2 // a log, not its marks
			case !errors.Is(err, fs.ErrNotExist):
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return removed, fmt.Errorf("remove log of job %s: %w", jobID, err)
	}
	return removed, nil
}

// AppendNote appends a line to the job's log and puts its file's
// modification time back, so a note about the log does not restart its
// retention. A legacy .log file is left as it is.
func (l *Logs) AppendNote(jobID string, line engine.LogLine) error {
	if ValidJobID(jobID) == nil {
		if _, err := os.Stat(l.jsonlPath(jobID)); errors.Is(err, fs.ErrNotExist) {
			return nil
		} else if err != nil {
			return fmt.Errorf("append log: %w", err)
		}
	}
	return l.LogHub.AppendNote(jobID, line)
}

// Stored says whether the job has a local log file, JSONL or legacy, and
// the size of its whole lines.
func (l *Logs) Stored(jobID string) (int64, bool, error) {
	if err := ValidJobID(jobID); err != nil {
		return 0, false, fmt.Errorf("read log: %w", err)
	}
	f, end, err := l.openLocal(jobID)
	if err != nil || f == nil {
		return 0, false, err
	}
	f.Close()
	return end, true, nil
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
		if !ok || !e.Type().IsRegular() || ValidJobID(id) != nil {
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
