package store

import (
	"context"
	"strings"

	"github.com/appliance-sh/appliance/engine"
)

// The tests read whole (small) logs as strings; the server streams them
// with ReadLog.

// Read returns the selected lines of the job's log as one string.
func (l *Logs) Read(jobID, step string) (string, error) {
	var b strings.Builder
	_, err := l.ReadLog(context.Background(), jobID, engine.LogQuery{Step: step}, &b)
	return b.String(), err
}

// Read returns the job's log like Logs.Read, in the order local JSONL file,
// legacy .log file, then the archive.
func (a *ArchivingLogs) Read(jobID, step string) (string, error) {
	var b strings.Builder
	_, err := a.ReadLog(context.Background(), jobID, engine.LogQuery{Step: step}, &b)
	return b.String(), err
}
