package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

var _ engine.LogSink = (*Logs)(nil)

// subscriberBuffer is how many appended chunks a live viewer may fall
// behind before it is dropped (it then reconnects for a fresh backfill).
const subscriberBuffer = 256

// Logs keeps one JSONL file per job, `<dir>/<job id>.jsonl`, with one
// writer at a time per job and live subscribers for the WebSocket stream.
// Each append opens and closes the file: appends come about once a second
// per running step, and no handle can be left open by a line that arrives
// after its job has ended.
type Logs struct {
	dir       string
	subBuffer int // chunks per subscriber channel

	limits LogLimits

	mu   sync.Mutex // guards jobs and stepCounts; each jobLog has its own lock for I/O
	jobs map[string]*jobLog
	// stepCounts holds the running jobs' per-step byte counts for the
	// step_log cap; an entry is changed only under its job's lock.
	stepCounts map[string]jobCounts
}

// jobLog is the live state of one job's log: its subscribers. Its mutex
// orders appends with subscriptions, so a subscriber sees every chunk
// exactly once, in backfill or as an update. It exists while an append is
// under way or someone watches.
type jobLog struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool // removed from Logs.jobs; callers retry
}

type subscriber struct {
	ch chan []byte
}

// OpenLogs uses dir (created if needed) for job logs, with the default
// limits (see SetLimits).
func OpenLogs(dir string) (*Logs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	return &Logs{dir: dir, subBuffer: subscriberBuffer, limits: LogLimits{}.withDefaults(),
		jobs: make(map[string]*jobLog), stepCounts: make(map[string]jobCounts)}, nil
}

// Dir is the directory holding the log files.
func (l *Logs) Dir() string { return l.dir }

// validJobID refuses ids that could name a file outside the log dir.
func validJobID(id string) error {
	if id == "" || len(id) > 255 || strings.ContainsAny(id, "/\\\x00") || strings.Contains(id, "..") || id == "." {
		return fmt.Errorf("job id %q is not a safe log file name: %w", id, engine.ErrInvalid)
	}
	return nil
}

func (l *Logs) jsonlPath(jobID string) string  { return filepath.Join(l.dir, jobID+".jsonl") }
func (l *Logs) legacyPath(jobID string) string { return filepath.Join(l.dir, jobID+".log") }

// lock returns the job's state, locked and still registered: Finish may
// retire a jobLog between the map lookup and the lock, so retry then.
func (l *Logs) lock(jobID string) *jobLog {
	for {
		l.mu.Lock()
		jl := l.jobs[jobID]
		if jl == nil {
			jl = &jobLog{subs: make(map[*subscriber]struct{})}
			l.jobs[jobID] = jl
		}
		l.mu.Unlock()
		jl.mu.Lock()
		if !jl.closed {
			return jl
		}
		jl.mu.Unlock()
	}
}

// wireLine fixes the file format: field order, and timestamps in UTC with
// nanoseconds and a `Z` suffix whatever the caller's location.
type wireLine struct {
	TS     string `json:"ts"`
	Stream string `json:"stream"`
	Step   string `json:"step"`
	Line   string `json:"line"`
}

// encodeLines returns the lines as JSONL and where each one ends.
func encodeLines(lines []engine.LogLine) (chunk []byte, ends []int, err error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <, > and & readable in logs
	ends = make([]int, len(lines))
	for i, ln := range lines {
		ts := ln.TS
		if ts.IsZero() {
			ts = time.Now()
		}
		err := enc.Encode(wireLine{TS: ts.UTC().Format(time.RFC3339Nano), Stream: ln.Stream, Step: ln.Step, Line: ln.Line})
		if err != nil {
			return nil, nil, fmt.Errorf("encode log line: %w", err)
		}
		ends[i] = buf.Len()
	}
	return buf.Bytes(), ends, nil
}

// Append writes the lines to the job's log as one chunk and hands that
// chunk to the job's live subscribers without waiting for them. Lines
// longer than the log_line limit are cut, and a step's lines beyond its
// step_log limit are dropped (see LogLimits).
func (l *Logs) Append(jobID string, lines []engine.LogLine) error {
	if err := validJobID(jobID); err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	if len(lines) == 0 {
		return nil
	}
	lines = l.cutLines(lines)
	chunk, ends, err := encodeLines(lines)
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	jl := l.lock(jobID)
	defer l.release(jobID, jl)
	counts, err := l.counts(jobID)
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	if chunk = l.admit(counts, lines, chunk, ends); len(chunk) == 0 {
		return nil
	}
	if err := l.write(jobID, jl, chunk); err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	return nil
}

// write appends a chunk to the job's file and hands it to the job's live
// subscribers. The caller holds the job's lock.
func (l *Logs) write(jobID string, jl *jobLog, chunk []byte) error {
	if err := appendFile(l.jsonlPath(jobID), chunk); err != nil {
		return err
	}
	for s := range jl.subs {
		select {
		case s.ch <- chunk:
		default:
			// A full buffer means a slow viewer: dropping it keeps writers
			// and other viewers moving; it reconnects for a fresh backfill.
			close(s.ch)
			delete(jl.subs, s)
		}
	}
	return nil
}

// cutLines returns the lines with each one cut to the log_line limit,
// copying only when one is too long.
func (l *Logs) cutLines(lines []engine.LogLine) []engine.LogLine {
	for i, ln := range lines {
		if len(ln.Line) <= l.limits.LogLine {
			continue
		}
		cut := append([]engine.LogLine(nil), lines...)
		for j := i; j < len(cut); j++ {
			cut[j].Line = cutLine(cut[j].Line, l.limits.LogLine)
		}
		return cut
	}
	return lines
}

func appendFile(path string, chunk []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(chunk)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// release unlocks a job's state, retiring it when nobody watches.
func (l *Logs) release(jobID string, jl *jobLog) {
	if len(jl.subs) == 0 {
		jl.closed = true
		l.mu.Lock()
		if l.jobs[jobID] == jl {
			delete(l.jobs, jobID)
		}
		l.mu.Unlock()
	}
	jl.mu.Unlock()
}

// Finish ends the job's live subscriptions; each subscriber still receives
// every chunk already sent before its channel reports closed. Lines
// appended later are still written. A capped step run that EndStep did not
// close gets its warning first.
func (l *Logs) Finish(jobID string) {
	if validJobID(jobID) == nil {
		jl := l.lock(jobID)
		l.mu.Lock()
		runs := l.stepCounts[jobID]
		delete(l.stepCounts, jobID)
		l.mu.Unlock()
		// Finish has no caller to answer: a failed write leaves the log
		// without the warning, as it would any line.
		_ = l.warnCapped(jobID, jl, runs)
		l.release(jobID, jl)
	}
	l.mu.Lock()
	jl := l.jobs[jobID]
	delete(l.jobs, jobID)
	l.mu.Unlock()
	if jl != nil {
		jl.retire()
	}
}

// Close finishes every job; the Logs must not be used afterwards.
func (l *Logs) Close() error {
	l.mu.Lock()
	jobs := l.jobs
	l.jobs = make(map[string]*jobLog)
	l.mu.Unlock()
	for _, jl := range jobs {
		jl.retire()
	}
	return nil
}

func (jl *jobLog) retire() {
	jl.mu.Lock()
	defer jl.mu.Unlock()
	jl.closed = true
	for s := range jl.subs {
		close(s.ch)
	}
	jl.subs = nil
}
