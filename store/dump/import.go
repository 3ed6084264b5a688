package dump

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

// ErrNotEmpty refuses an import into a store that holds records: a dump
// replaces nothing and merges with nothing.
var ErrNotEmpty = errors.New("the target store is not empty")

// ErrBadDump is a dump that is not one, is of another version, or was cut
// short.
var ErrBadDump = errors.New("not a complete appliance dump")

// logBuffer bounds the log lines an import holds until their jobs commit.
const logBuffer = 64 << 20

// maxLine bounds one record (a revision snapshot is the largest).
const maxLine = 512 << 20

// Import reads a dump from r into dst, which must be empty. The dump is
// checked whole (its header, every line's JSON, its end count) before the
// first write, spooled to a file in tmpDir, so a truncated or damaged
// dump is refused with nothing written.
func Import(ctx context.Context, dst Sources, r io.Reader, tmpDir string) (int64, error) {
	if err := empty(ctx, dst.Store); err != nil {
		return 0, err
	}
	spool, err := os.CreateTemp(tmpDir, "appliance-import-*.jsonl")
	if err != nil {
		return 0, fmt.Errorf("spool the dump: %w", err)
	}
	defer os.Remove(spool.Name())
	defer spool.Close()
	n, err := check(io.TeeReader(r, spool))
	if err != nil {
		return 0, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return n, load(ctx, dst, spool)
}

func empty(ctx context.Context, s Store) error {
	_, jobs, err := s.Jobs(ctx, engine.JobFilter{Limit: 1})
	if err != nil {
		return fmt.Errorf("read the target store: %w", err)
	}
	_, users, err := s.Users(ctx, 1, 0)
	if err != nil {
		return fmt.Errorf("read the target store: %w", err)
	}
	_, workers, err := s.Workers(ctx, 1, 0)
	if err != nil {
		return fmt.Errorf("read the target store: %w", err)
	}
	if jobs+users+workers > 0 {
		return fmt.Errorf("%w: it has %d jobs, %d users and %d workers; import into a new database", ErrNotEmpty, jobs, users, workers)
	}
	return nil
}

// lines reads r's records one by one.
type lines struct {
	r    *bufio.Reader
	line int64
}

func newLines(r io.Reader) *lines { return &lines{r: bufio.NewReaderSize(r, 1<<16)} }

// next returns the next record, io.EOF after the last.
func (l *lines) next() (Record, error) {
	var buf []byte
	for {
		part, err := l.r.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > maxLine {
			return Record{}, fmt.Errorf("%w: line %d is longer than %d bytes", ErrBadDump, l.line+1, maxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(buf) == 0 {
			return Record{}, io.EOF
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return Record{}, err
		}
		break
	}
	l.line++
	var rec Record
	if err := json.Unmarshal(bytes.TrimSpace(buf), &rec); err != nil || rec.Kind == "" {
		return Record{}, fmt.Errorf("%w: line %d is not a record: %v", ErrBadDump, l.line, err)
	}
	return rec, nil
}

// check reads a whole dump and says whether it is complete.
func check(r io.Reader) (int64, error) {
	ls := newLines(r)
	first, err := ls.next()
	if errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("%w: it is empty", ErrBadDump)
	}
	if err != nil {
		return 0, err
	}
	var h Header
	if first.Kind != KindHeader || json.Unmarshal(first.Data, &h) != nil || h.Format != Format {
		return 0, fmt.Errorf("%w: the first line is no %s header", ErrBadDump, Format)
	}
	if h.Version < 1 || h.Version > Version {
		return 0, fmt.Errorf("%w: version %d, this binary reads versions 1 to %d", ErrBadDump, h.Version, Version)
	}
	var n int64
	for {
		rec, err := ls.next()
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w: it ends after %d records without its end line (cut short?)", ErrBadDump, n)
		}
		if err != nil {
			return 0, err
		}
		if rec.Kind != KindEnd {
			n++
			continue
		}
		var end End
		if err := json.Unmarshal(rec.Data, &end); err != nil || end.Records != n {
			return 0, fmt.Errorf("%w: its end line counts %d records, it holds %d", ErrBadDump, end.Records, n)
		}
		if _, err := ls.next(); !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w: lines follow its end line", ErrBadDump)
		}
		return n, nil
	}
}

// load writes a checked dump: users and keys as they come, jobs with
// their steps and workers in batches through Commit, logs as their chunks
// come, and the small tables at the end.
func load(ctx context.Context, dst Sources, r io.Reader) error {
	ls := newLines(r)
	var (
		batch engine.Batch
		jobs  = map[string]bool{} // the jobs of the pending batch and before
		state State
		// Logs wait for their jobs' commit (a store may tie a log to its
		// job), up to logBuffer bytes, which commits early.
		logs      []LogChunk
		logsBytes int
		logMarks  []Mark // after their jobs' lines
		// The audit trail, restored verbatim a page at a time.
		auditAnchor audit.Head
		entries     []audit.Entry
	)
	commit := func() error {
		if len(batch.Jobs)+len(batch.Steps)+len(batch.Workers) > 0 {
			if err := dst.Store.Commit(ctx, &batch); err != nil {
				return err
			}
			batch = engine.Batch{}
		}
		for _, c := range logs {
			if err := dst.Logs.Append(c.JobID, c.Lines); err != nil {
				return fmt.Errorf("log of job %s: %w", c.JobID, err)
			}
		}
		logs, logsBytes = nil, 0
		for i := 0; i < len(logMarks); {
			j := i + 1
			for j < len(logMarks) && logMarks[j].JobID == logMarks[i].JobID {
				j++
			}
			if err := dst.Logs.RestoreRunMarks(logMarks[i].JobID, logMarks[i:j]); err != nil {
				return fmt.Errorf("log of job %s: %w", logMarks[i].JobID, err)
			}
			i = j
		}
		logMarks = nil
		return nil
	}
	for {
		rec, err := ls.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		at := fmt.Sprintf("line %d (%s)", ls.line, rec.Kind)
		if err := ctx.Err(); err != nil {
			return err
		}
		switch rec.Kind {
		case KindHeader, KindEnd:
		case KindUser:
			var u accounts.User
			if err := decode(rec, &u, at); err != nil {
				return err
			}
			if err := dst.Store.CreateUser(ctx, &u); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
		case KindAPIKey:
			var k accounts.APIKey
			if err := decode(rec, &k, at); err != nil {
				return err
			}
			if err := dst.Store.CreateAPIKey(ctx, &k); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
		case KindAuthLink:
			var l accounts.AuthLink
			if err := decode(rec, &l, at); err != nil {
				return err
			}
			state.AuthLinks = append(state.AuthLinks, l)
		case KindWorker:
			var w engine.Worker
			if err := decode(rec, &w, at); err != nil {
				return err
			}
			batch.Workers = append(batch.Workers, &w)
		case KindJob:
			if len(batch.Jobs) >= page {
				if err := commit(); err != nil {
					return fmt.Errorf("%s: %w", at, err)
				}
			}
			var j engine.Job
			if err := decode(rec, &j, at); err != nil {
				return err
			}
			jobs[j.ID] = true
			batch.Jobs = append(batch.Jobs, &j)
		case KindStep:
			var s engine.Step
			if err := decode(rec, &s, at); err != nil {
				return err
			}
			if !jobs[s.JobID] {
				return fmt.Errorf("%w: %s: step %q of job %s comes before its job", ErrBadDump, at, s.Name, s.JobID)
			}
			batch.Steps = append(batch.Steps, &s)
		case KindLog:
			var c LogChunk
			if err := decode(rec, &c, at); err != nil {
				return err
			}
			if dst.Logs == nil {
				continue
			}
			logs = append(logs, c)
			if logsBytes += len(rec.Data); logsBytes > logBuffer {
				if err := commit(); err != nil {
					return fmt.Errorf("%s: %w", at, err)
				}
			}
		case KindLogMark:
			var m Mark
			if err := decode(rec, &m, at); err != nil {
				return err
			}
			if dst.Logs != nil {
				logMarks = append(logMarks, m)
			}
		case KindFire:
			var f Fire
			if err := decode(rec, &f, at); err != nil {
				return err
			}
			state.Fires = append(state.Fires, engine.TriggerFire{Workspace: f.Workspace, Trigger: f.Trigger, At: f.At})
		case KindEventMark:
			var m Mark
			if err := decode(rec, &m, at); err != nil {
				return err
			}
			state.Marks = append(state.Marks, m)
		case KindConsumed:
			var c Consumed
			if err := decode(rec, &c, at); err != nil {
				return err
			}
			state.Consumed = append(state.Consumed, c)
		case KindSnapshot:
			var s Snapshot
			if err := decode(rec, &s, at); err != nil {
				return err
			}
			if dst.Snapshots == nil {
				continue
			}
			if err := dst.Snapshots.Put(s.Workspace, s.Revision, bytes.NewReader(s.TarGz)); err != nil {
				return fmt.Errorf("%s: revision snapshot %s/%s: %w", at, s.Workspace, s.Revision, err)
			}
		case KindAuditAnchor:
			if err := decode(rec, &auditAnchor, at); err != nil {
				return err
			}
		case KindAudit:
			var e audit.Entry
			if err := decode(rec, &e, at); err != nil {
				return err
			}
			if entries = append(entries, e); len(entries) == auditPage {
				if err := dst.Store.RestoreAudit(ctx, auditAnchor, entries); err != nil {
					return fmt.Errorf("%s: %w", at, err)
				}
				entries = entries[:0]
			}
		default:
			return fmt.Errorf("%w: %s: unknown kind of record", ErrBadDump, at)
		}
	}
	if err := commit(); err != nil {
		return err
	}
	if len(entries) > 0 {
		if err := dst.Store.RestoreAudit(ctx, auditAnchor, entries); err != nil {
			return fmt.Errorf("restore the audit trail: %w", err)
		}
	}
	if err := dst.Store.RestoreState(ctx, state); err != nil {
		return fmt.Errorf("restore trigger state, event marks and auth links: %w", err)
	}
	return nil
}

func decode(rec Record, v any, at string) error {
	if err := json.Unmarshal(rec.Data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadDump, at, err)
	}
	return nil
}
