package store

import (
	"context"
	"io"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store/dump"
)

// LogBackend is where job logs live: JSONL files (*Logs) or a database
// table (store/postgres). ArchivingLogs, the Sweeper, the engine and the
// API work over either; store/logtest is the contract both pass.
type LogBackend interface {
	engine.LogSink      // Append, Finish
	engine.StepLogEnder // EndStep
	engine.RunLogSink   // AppendRun
	// ReadLog writes the lines q selects from the job's log to w as it
	// reads them, and says which lines it wrote. A job without a log
	// writes nothing.
	ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error)
	// Subscribe starts a live view: the part of the log q selects, then
	// every chunk appended after it (see LogHub.Subscribe).
	Subscribe(jobID string, q engine.LogQuery) (backfill io.ReadCloser, updates <-chan []byte, cancel func(), err error)
	// Stored says whether the backend itself holds a log for the job (not
	// its archive), and how many bytes of whole lines it has.
	Stored(jobID string) (size int64, ok bool, err error)
	// Remove deletes the job's log from the backend (an archived copy
	// stays), waiting for an append under way.
	Remove(jobID string) (removed bool, err error)
	// LastWrittenBefore lists the jobs whose log was last written before t.
	LastWrittenBefore(t time.Time) ([]string, error)
	// AppendNote appends a line about a log the backend holds, keeping
	// its last-written time so the note does not restart its retention;
	// a job without a log is left without one.
	AppendNote(jobID string, line engine.LogLine) error
	// SetLimits sets the log limits; call it before the first Append.
	SetLimits(LogLimits)
	// RunMarks returns each step's last run mark in the job's log (see
	// LogHub.AppendRun), by step: what an export carries, so that a push
	// repeated to the server a dump moved to writes no line twice.
	RunMarks(jobID string) ([]dump.Mark, error)
	// RestoreRunMarks records an import's run marks, after the job's lines.
	RestoreRunMarks(jobID string, marks []dump.Mark) error
	// Close ends every live subscription.
	Close() error
}

// SweepDB is what the Sweeper deletes jobs through: *DB, or the
// PostgreSQL store.
type SweepDB interface {
	// DeleteEndedJobs deletes, in one transaction, up to budget records of
	// the jobs that ended before cutoff, walking from where the last call
	// stopped (from; nil at first).
	DeleteEndedJobs(ctx context.Context, cutoff time.Time, from []byte, budget int) (SweepResult, error)
	// EndedBefore returns those of ids whose job ended before cutoff, or
	// that have no job record any more.
	EndedBefore(ctx context.Context, ids []string, cutoff time.Time) ([]string, error)
}

var _ SweepDB = (*DB)(nil)
