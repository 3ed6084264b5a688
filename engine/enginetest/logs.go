package enginetest

import (
	"sync"

	"github.com/appliance-sh/appliance/engine"
)

// Logs is an engine.LogSink that records every line and every Finish.
type Logs struct {
	mu       sync.Mutex
	lines    map[string][]engine.LogLine
	finished map[string]int
	before   func(jobID string, lines []engine.LogLine)
}

// BeforeAppend has f called with every Append's lines before they are
// recorded, on the appender's goroutine (a test can look at the store as
// the lines arrive).
func (l *Logs) BeforeAppend(f func(jobID string, lines []engine.LogLine)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.before = f
}

// NewLogs returns an empty recorder.
func NewLogs() *Logs {
	return &Logs{lines: map[string][]engine.LogLine{}, finished: map[string]int{}}
}

// Append records lines of a job.
func (l *Logs) Append(jobID string, lines []engine.LogLine) error {
	l.mu.Lock()
	before := l.before
	l.mu.Unlock()
	if before != nil {
		before(jobID, lines)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines[jobID] = append(l.lines[jobID], lines...)
	return nil
}

// Finish records that a job's log is complete.
func (l *Logs) Finish(jobID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.finished[jobID]++
}

// Lines returns a job's recorded lines.
func (l *Logs) Lines(jobID string) []engine.LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]engine.LogLine(nil), l.lines[jobID]...)
}

// ServerLines returns the text of a job's `_server` lines.
func (l *Logs) ServerLines(jobID string) []string {
	var out []string
	for _, line := range l.Lines(jobID) {
		if line.Step == engine.ServerStep {
			out = append(out, line.Line)
		}
	}
	return out
}

// Finished reports how many times Finish was called for a job.
func (l *Logs) Finished(jobID string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished[jobID]
}
