package store

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/jsonstr"
)

var _ LogBackend = (*Logs)(nil)

// Logs keeps one JSONL file per job, `<dir>/<job id>.jsonl`, with one
// writer at a time per job and live subscribers for the WebSocket stream
// (its LogHub). Each append opens and closes the file: appends come about
// once a second per running step, and no handle can be left open by a
// line that arrives after its job has ended.
type Logs struct {
	*LogHub
	dir string
}

// OpenLogs uses dir (created if needed) for job logs, with the default
// limits (see SetLimits).
func OpenLogs(dir string) (*Logs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create log dir: %w", err)
	}
	l := &Logs{dir: dir}
	l.LogHub = NewLogHub(logFiles{l})
	return l, nil
}

// Dir is the directory holding the log files.
func (l *Logs) Dir() string { return l.dir }

func (l *Logs) jsonlPath(jobID string) string  { return filepath.Join(l.dir, jobID+".jsonl") }
func (l *Logs) legacyPath(jobID string) string { return filepath.Join(l.dir, jobID+".log") }

// logFiles is the LogMedium of Logs: one JSONL file per job.
type logFiles struct{ l *Logs }

// Write appends the chunk's lines to the job's file. The file's lines are
// the whole record of the counts: step runs are recounted from them
// (Runs); a chunk that advances a run's mark first writes the marks file
// (logs_marks.go).
func (m logFiles) Write(jobID string, c LogChunk) error {
	if c.Marked != "" {
		return m.writeMarked(jobID, c)
	}
	if len(c.Data) == 0 {
		return nil
	}
	path := m.l.jsonlPath(jobID)
	if !c.Note {
		return appendFile(path, c.Data)
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if err := appendFile(path, c.Data); err != nil {
		return err
	}
	return os.Chtimes(path, time.Time{}, info.ModTime())
}

// writeMarked writes the marks file, naming where the chunk's lines go,
// then appends them.
func (m logFiles) writeMarked(jobID string, c LogChunk) error {
	f, err := os.OpenFile(m.l.jsonlPath(jobID), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := writeMark(m.l.marksPath(jobID), c, info.Size()); err != nil {
		return err
	}
	if _, err := f.Write(c.Data); err != nil {
		return err
	}
	return f.Close()
}

// Marks reads the marks file beside the job's log.
func (m logFiles) Marks(jobID string) (map[string]RunMark, error) {
	return readMarks(m.l.marksPath(jobID), m.l.jsonlPath(jobID))
}

// Runs recounts the job's file and reads its runs' marks.
func (m logFiles) Runs(jobID string) (StepRuns, error) {
	runs, err := countFile(m.l.jsonlPath(jobID))
	if err != nil {
		return nil, err
	}
	marks, err := m.Marks(jobID)
	if err != nil {
		return nil, err
	}
	for step, mark := range marks {
		runs.step(step).Mark = mark
	}
	return runs, nil
}

// wireLine fixes the file format: field order, and timestamps in UTC with
// nanoseconds and a `Z` suffix whatever the caller's location. The lines
// are written by hand (encodeLines), byte for byte as an encoding/json
// Encoder with SetEscapeHTML(false) wrote this struct; readers decode it.
type wireLine struct {
	TS     string `json:"ts"`
	Stream string `json:"stream"`
	Step   string `json:"step"`
	Line   string `json:"line"`
}

// encodeLines returns the lines as JSONL and where each one ends. Each
// pushed line is encoded here, so it is done by hand: encoding/json's
// reflection cost most of the time of an append.
func encodeLines(lines []engine.LogLine) (chunk []byte, ends []int) {
	size := 0
	for _, ln := range lines {
		size += len(`{"ts":"2006-01-02T15:04:05.999999999Z","stream":"stdout","step":"","line":""}`+"\n") + len(ln.Step) + len(ln.Line)
	}
	buf := make([]byte, 0, size)
	ends = make([]int, len(lines))
	var times jsonstr.Times
	for i, ln := range lines {
		ts := ln.TS
		if ts.IsZero() {
			ts = time.Now()
		}
		buf = appendWireLine(buf, &times, ts, ln.Stream, ln.Step, ln.Line)
		ends[i] = len(buf)
	}
	return buf, ends
}

// appendWireLine appends one line of the file, as wireLine.
func appendWireLine(dst []byte, times *jsonstr.Times, ts time.Time, stream, step, line string) []byte {
	// RFC 3339 text needs no escaping.
	dst = append(dst, `{"ts":"`...)
	dst = times.Append(dst, ts.UTC())
	dst = append(dst, `","stream":`...)
	dst = jsonstr.AppendString(dst, stream)
	dst = append(dst, `,"step":`...)
	dst = jsonstr.AppendString(dst, step)
	dst = append(dst, `,"line":`...)
	dst = jsonstr.AppendString(dst, line)
	return append(dst, "}\n"...)
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
