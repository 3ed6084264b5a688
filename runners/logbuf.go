package runners

import (
	"fmt"
	"sync"
	"time"
)

// Bounds of a step's pending log lines while the server cannot take them.
const (
	maxBufferedLines = 100_000
	maxPushLines     = 5_000 // per push request
)

// logBuffer holds a step's output lines until they are pushed.
type logBuffer struct {
	mu      sync.Mutex
	lines   []LogLine
	dropped int
	now     func() time.Time
}

func newLogBuffer() *logBuffer {
	return &logBuffer{now: func() time.Time { return time.Now().UTC() }}
}

// add is the Step.Log sink.
func (b *logBuffer) add(stream, line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, LogLine{TS: b.now(), Stream: stream, Line: line})
	if over := len(b.lines) - maxBufferedLines; over > 0 {
		// The server has been unreachable for long: keep the newest lines
		// and say how many went, rather than grow without bound.
		b.lines = append(b.lines[:0:0], b.lines[over:]...)
		b.dropped += over
	}
}

// take removes and returns up to maxPushLines of the oldest lines.
func (b *logBuffer) take() []LogLine {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []LogLine
	if b.dropped > 0 {
		out = append(out, LogLine{TS: b.now(), Stream: Stderr,
			Line: fmt.Sprintf("[appliance worker: %d log lines dropped while the server was unreachable]", b.dropped)})
		b.dropped = 0
	}
	n := min(len(b.lines), maxPushLines)
	out = append(out, b.lines[:n]...)
	b.lines = b.lines[n:]
	return out
}

// putBack returns lines that failed to push to the front of the buffer.
func (b *logBuffer) putBack(lines []LogLine) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(append(make([]LogLine, 0, len(lines)+len(b.lines)), lines...), b.lines...)
}

func (b *logBuffer) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines) == 0 && b.dropped == 0
}
