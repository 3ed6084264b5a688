// Package dump copies a server's whole state from one store to another as
// JSON lines: `appliance export` writes it, `appliance import` reads it
// into an empty store, bbolt or PostgreSQL alike. It works through the
// stores' ports, so one copy of the format serves both directions, and an
// import commits through the same code as the server's own writes (the
// indexes and counts are built as they are for a new record).
//
// What it carries: jobs with their steps and logs (with each step's last
// run mark, so a worker's push repeated to the new server writes no line
// twice), workers, users, their auth links and API keys (as hashes),
// trigger state, event-source marks, and workspace revision snapshots.
// Not live sign-in sessions (refresh tokens): users sign in again after a
// move.
//
// The first line names the format and its version; the last counts the
// records, so a dump cut short is refused rather than half-imported.
package dump

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
)

// Format and Version head every dump. Version 2 added log_mark records;
// an import reads version 1 too (its logs carry no marks).
const (
	Format  = "appliance-dump"
	Version = 2
)

// The kinds of record, one a line, in the order an export writes them.
const (
	KindHeader    = "header"
	KindUser      = "user"
	KindAuthLink  = "auth_link"
	KindAPIKey    = "api_key"
	KindWorker    = "worker"
	KindJob       = "job"
	KindStep      = "step"
	KindLog       = "log"
	KindLogMark   = "log_mark"
	KindFire      = "trigger_fire"
	KindEventMark = "event_mark"
	KindConsumed  = "events_consumed"
	KindSnapshot  = "snapshot"
	// The audit trail: the chain's anchor, then its entries verbatim
	// (their numbers and MACs are the chain's: an import re-signs nothing).
	KindAuditAnchor = "audit_anchor"
	KindAudit       = "audit"
	KindEnd         = "end"
)

// Record is one line of a dump.
type Record struct {
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

// Header is a dump's first record.
type Header struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	ExportedAt time.Time `json:"exported_at"`
}

// End is a dump's last record: how many records came between.
type End struct {
	Records int64 `json:"records"`
}

// LogChunk is part of a job's log, in order.
type LogChunk struct {
	JobID string           `json:"job_id"`
	Lines []engine.LogLine `json:"lines"`
}

// Fire is a scheduler trigger's last fire.
type Fire struct {
	Workspace string    `json:"workspace"`
	Trigger   string    `json:"trigger"`
	At        time.Time `json:"at"`
}

// Mark is a step run's last accepted line: an event-source step's
// (event_mark), or the last line a run pushed into its job's log
// (log_mark).
type Mark struct {
	JobID string `json:"job_id"`
	Step  string `json:"step"`
	Run   string `json:"run"`
	Seq   int64  `json:"seq"`
}

// Consumed is how many events a source has had accepted.
type Consumed struct {
	Source string `json:"source"`
	Count  int64  `json:"count"`
}

// Snapshot is a workspace revision's files, as the gzip tarball the
// snapshot store keeps (base64 in the JSON).
type Snapshot struct {
	Workspace string `json:"workspace"`
	Revision  string `json:"revision"`
	TarGz     []byte `json:"tar_gz"`
}

// State is what a store keeps beside its jobs and users: small tables an
// export reads whole.
type State struct {
	AuthLinks []accounts.AuthLink
	Fires     []engine.TriggerFire
	Marks     []Mark
	Consumed  []Consumed
}

// sort orders the tables as every store's export writes them, whatever
// order a store reads them in.
func (s *State) sort() {
	slices.SortFunc(s.AuthLinks, func(a, b accounts.AuthLink) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Subject, b.Subject))
	})
	slices.SortFunc(s.Fires, func(a, b engine.TriggerFire) int {
		return cmp.Or(cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Trigger, b.Trigger))
	})
	slices.SortFunc(s.Marks, func(a, b Mark) int { return cmp.Or(cmp.Compare(a.JobID, b.JobID), cmp.Compare(a.Step, b.Step)) })
	slices.SortFunc(s.Consumed, func(a, b Consumed) int { return cmp.Compare(a.Source, b.Source) })
}

// Store is what an export reads and an import writes. Both stores
// implement it; DumpState and RestoreState are theirs alone (their tables
// have no other reader), the rest are the ports the server uses.
type Store interface {
	Commit(ctx context.Context, b *engine.Batch) error
	Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error)
	Steps(ctx context.Context, jobID string) ([]*engine.Step, error)
	Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error)

	Users(ctx context.Context, limit, offset int) ([]*accounts.User, int, error)
	CreateUser(ctx context.Context, u *accounts.User) error
	APIKeys(ctx context.Context, userID string) ([]*accounts.APIKey, error)
	CreateAPIKey(ctx context.Context, k *accounts.APIKey) error

	AuditHeads(ctx context.Context) (anchor, head audit.Head, err error)
	AuditEntries(ctx context.Context, f audit.Filter) ([]audit.Entry, error)
	RestoreAudit(ctx context.Context, anchor audit.Head, entries []audit.Entry) error

	DumpState(ctx context.Context) (State, error)
	// RestoreState writes s into an empty store (auth links after their users).
	RestoreState(ctx context.Context, s State) error
}

// Logs reads and writes job logs.
type Logs interface {
	ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error)
	// Append writes lines as they are, times included.
	Append(jobID string, lines []engine.LogLine) error
	// RunMarks returns the job's log run marks, by step; RestoreRunMarks
	// records them after the job's lines.
	RunMarks(jobID string) ([]Mark, error)
	RestoreRunMarks(jobID string, marks []Mark) error
}

// Snapshots lists, reads and writes revision snapshots.
type Snapshots interface {
	List() ([]SnapshotRef, error)
	Open(workspace, revision string) (io.ReadCloser, error)
	// Put stores a snapshot's tarball as it is.
	Put(workspace, revision string, tarGz io.Reader) error
}

// SnapshotRef names a snapshot.
type SnapshotRef struct{ Workspace, Revision string }

// Sources is one server's state: its store, logs and snapshots.
type Sources struct {
	Store     Store
	Logs      Logs
	Snapshots Snapshots
}

// page is how many jobs (and users, workers) an export reads at once, and
// how many jobs an import commits in one batch.
const page = 200

// logChunk is how many log lines one record holds.
const logChunk = 1000

// Export writes everything in src to w, one record a line.
func Export(ctx context.Context, src Sources, w io.Writer, now time.Time) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	var n int64
	put := func(kind string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", kind, err)
		}
		n++
		return enc.Encode(Record{Kind: kind, Data: data})
	}
	if err := put(KindHeader, Header{Format: Format, Version: Version, ExportedAt: now.UTC()}); err != nil {
		return 0, err
	}
	n = 0 // the header and the end are not counted
	if err := exportUsers(ctx, src.Store, put); err != nil {
		return n, err
	}
	state, err := src.Store.DumpState(ctx)
	if err != nil {
		return n, fmt.Errorf("read state: %w", err)
	}
	state.sort()
	for _, l := range state.AuthLinks {
		if err := put(KindAuthLink, l); err != nil {
			return n, err
		}
	}
	for off := 0; ; off += page {
		ws, total, err := src.Store.Workers(ctx, page, off)
		if err != nil {
			return n, fmt.Errorf("read workers: %w", err)
		}
		for _, w := range ws {
			if err := put(KindWorker, w); err != nil {
				return n, err
			}
		}
		if len(ws) == 0 || off+len(ws) >= total {
			break
		}
	}
	if err := exportJobs(ctx, src, put); err != nil {
		return n, err
	}
	for _, f := range state.Fires {
		if err := put(KindFire, Fire{Workspace: f.Workspace, Trigger: f.Trigger, At: f.At}); err != nil {
			return n, err
		}
	}
	for _, m := range state.Marks {
		if err := put(KindEventMark, m); err != nil {
			return n, err
		}
	}
	for _, c := range state.Consumed {
		if err := put(KindConsumed, c); err != nil {
			return n, err
		}
	}
	if src.Snapshots != nil {
		if err := exportSnapshots(src.Snapshots, put); err != nil {
			return n, err
		}
	}
	if err := exportAudit(ctx, src.Store, put); err != nil {
		return n, err
	}
	count := n
	if err := put(KindEnd, End{Records: count}); err != nil {
		return count, err
	}
	return count, bw.Flush()
}

func exportUsers(ctx context.Context, s Store, put func(string, any) error) error {
	for off := 0; ; off += page {
		us, total, err := s.Users(ctx, page, off)
		if err != nil {
			return fmt.Errorf("read users: %w", err)
		}
		for _, u := range us {
			if err := put(KindUser, u); err != nil {
				return err
			}
			keys, err := s.APIKeys(ctx, u.ID)
			if err != nil {
				return fmt.Errorf("read API keys of user %s: %w", u.ID, err)
			}
			for _, k := range keys {
				if err := put(KindAPIKey, k); err != nil {
					return err
				}
			}
		}
		if len(us) == 0 || off+len(us) >= total {
			return nil
		}
	}
}

// exportJobs walks the jobs by cursor, newest first, each followed by its
// steps and its log.
func exportJobs(ctx context.Context, src Sources, put func(string, any) error) error {
	var cursor *engine.JobCursor
	for {
		jobs, _, err := src.Store.Jobs(ctx, engine.JobFilter{Cursor: cursor, Limit: page})
		if err != nil {
			return fmt.Errorf("read jobs: %w", err)
		}
		for _, j := range jobs {
			if err := put(KindJob, j); err != nil {
				return err
			}
			steps, err := src.Store.Steps(ctx, j.ID)
			if err != nil {
				return fmt.Errorf("read steps of job %s: %w", j.ID, err)
			}
			for _, s := range steps {
				if err := put(KindStep, s); err != nil {
					return err
				}
			}
			if src.Logs != nil {
				if err := exportLog(ctx, src.Logs, j.ID, put); err != nil {
					return err
				}
				marks, err := src.Logs.RunMarks(j.ID)
				if err != nil {
					return fmt.Errorf("read log marks of job %s: %w", j.ID, err)
				}
				for _, m := range marks {
					if err := put(KindLogMark, m); err != nil {
						return err
					}
				}
			}
		}
		if len(jobs) < page {
			return nil
		}
		last := jobs[len(jobs)-1]
		cursor = &engine.JobCursor{CreatedAt: last.CreatedAt.UnixNano(), ID: last.ID}
	}
}

// exportLog copies a job's log in chunks; a job without one has none.
func exportLog(ctx context.Context, logs Logs, jobID string, put func(string, any) error) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := logs.ReadLog(ctx, jobID, engine.LogQuery{}, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	dec := json.NewDecoder(pr)
	chunk := LogChunk{JobID: jobID}
	flush := func() error {
		if len(chunk.Lines) == 0 {
			return nil
		}
		err := put(KindLog, chunk)
		chunk.Lines = nil
		return err
	}
	for {
		var l engine.LogLine
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			pr.CloseWithError(err)
			<-done
			if errors.Is(err, engine.ErrNotFound) {
				return nil
			}
			return fmt.Errorf("read log of job %s: %w", jobID, err)
		}
		chunk.Lines = append(chunk.Lines, l)
		if len(chunk.Lines) == logChunk {
			if err := flush(); err != nil {
				pr.CloseWithError(err)
				<-done
				return err
			}
		}
	}
	if err := <-done; err != nil && !errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	return flush()
}

// auditPage is how many audit entries are read, and restored, at once.
const auditPage = 1000

func exportAudit(ctx context.Context, s Store, put func(string, any) error) error {
	anchor, _, err := s.AuditHeads(ctx)
	if err != nil {
		return fmt.Errorf("read the audit trail: %w", err)
	}
	if err := put(KindAuditAnchor, anchor); err != nil {
		return err
	}
	for after := anchor.Seq; ; {
		es, err := s.AuditEntries(ctx, audit.Filter{After: after, Limit: auditPage})
		if err != nil {
			return fmt.Errorf("read the audit trail: %w", err)
		}
		for i := range es {
			if err := put(KindAudit, &es[i]); err != nil {
				return err
			}
		}
		if len(es) < auditPage {
			return nil
		}
		after = es[len(es)-1].Seq
	}
}

func exportSnapshots(s Snapshots, put func(string, any) error) error {
	refs, err := s.List()
	if err != nil {
		return fmt.Errorf("list revision snapshots: %w", err)
	}
	for _, r := range refs {
		f, err := s.Open(r.Workspace, r.Revision)
		if err != nil {
			return fmt.Errorf("read revision snapshot %s/%s: %w", r.Workspace, r.Revision, err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("read revision snapshot %s/%s: %w", r.Workspace, r.Revision, err)
		}
		if err := put(KindSnapshot, Snapshot{Workspace: r.Workspace, Revision: r.Revision, TarGz: b}); err != nil {
			return err
		}
	}
	return nil
}
