package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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

// DefaultLogDir is where job logs go when log_storage.local_dir is not set.
func DefaultLogDir() string { return filepath.Join(os.TempDir(), "appliance", "logs") }

// Logs keeps one JSONL file per job, `<dir>/<job id>.jsonl`, with one
// writer at a time per job and live subscribers for the WebSocket stream.
// Each append opens and closes the file: appends come about once a second
// per running step, and no handle can be left open by a line that arrives
// after its job has ended.
type Logs struct {
	dir       string
	subBuffer int // chunks per subscriber channel

	mu   sync.Mutex // guards jobs; each jobLog has its own lock for I/O
	jobs map[string]*jobLog
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

// OpenLogs uses dir (created if needed) for job logs.
func OpenLogs(dir string) (*Logs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	return &Logs{dir: dir, subBuffer: subscriberBuffer, jobs: make(map[string]*jobLog)}, nil
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

func encodeLines(lines []engine.LogLine) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep <, > and & readable in logs
	for _, ln := range lines {
		ts := ln.TS
		if ts.IsZero() {
			ts = time.Now()
		}
		err := enc.Encode(wireLine{TS: ts.UTC().Format(time.RFC3339Nano), Stream: ln.Stream, Step: ln.Step, Line: ln.Line})
		if err != nil {
			return nil, fmt.Errorf("encode log line: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// Append writes the lines to the job's log as one chunk and hands that
// chunk to the job's live subscribers without waiting for them.
func (l *Logs) Append(jobID string, lines []engine.LogLine) error {
	if err := validJobID(jobID); err != nil {
		return fmt.Errorf("append log: %w", err)
	}
	if len(lines) == 0 {
		return nil
	}
	chunk, err := encodeLines(lines)
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
	}
	jl := l.lock(jobID)
	defer l.release(jobID, jl)
	if err := appendFile(l.jsonlPath(jobID), chunk); err != nil {
		return fmt.Errorf("append log of job %s: %w", jobID, err)
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
// appended later are still written.
func (l *Logs) Finish(jobID string) {
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

// Read returns the job's log ("" when there is none yet); with a step, only
// that step's lines. Without a JSONL file it reads a legacy `<job id>.log`
// file, filtered the same way when a step is given.
func (l *Logs) Read(jobID, step string) (string, error) {
	if err := validJobID(jobID); err != nil {
		return "", fmt.Errorf("read log: %w", err)
	}
	data, err := l.readFile(jobID)
	if err != nil {
		return "", fmt.Errorf("read log of job %s: %w", jobID, err)
	}
	if step == "" {
		return string(data), nil
	}
	return string(filterStep(data, step)), nil
}

// readFile reads the JSONL file, cut after its last complete line so a
// concurrent append never shows half a line, else the legacy file whole.
func (l *Logs) readFile(jobID string) ([]byte, error) {
	data, err := os.ReadFile(l.jsonlPath(jobID))
	if err == nil {
		return data[:bytes.LastIndexByte(data, '\n')+1], nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	data, err = os.ReadFile(l.legacyPath(jobID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// filterStep keeps the lines whose step field is step; lines that do not
// decode belong to no step.
func filterStep(data []byte, step string) []byte {
	var out []byte
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		var l struct {
			Step string `json:"step"`
		}
		if json.Unmarshal(line, &l) == nil && l.Step == step {
			out = append(out, line...)
		}
	}
	return out
}
