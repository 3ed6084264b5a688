package app

import (
	"github.com/appliance-sh/appliance/engine"
)

// meteredLogs counts the bytes of log text appended, for metrics.
type meteredLogs struct {
	serverLogs
	metrics interface{ LogAppended(n int) }
}

func (m meteredLogs) Append(jobID string, lines []engine.LogLine) error {
	if err := m.serverLogs.Append(jobID, lines); err != nil {
		return err
	}
	m.metrics.LogAppended(textBytes(lines))
	return nil
}

// AppendRun counts the lines of a push as Append does, including those
// the log already had (a repeated push is rare).
func (m meteredLogs) AppendRun(jobID, step, run string, lines []engine.LogLine) error {
	if err := m.serverLogs.AppendRun(jobID, step, run, lines); err != nil {
		return err
	}
	m.metrics.LogAppended(textBytes(lines))
	return nil
}

func textBytes(lines []engine.LogLine) int {
	n := 0
	for _, l := range lines {
		n += len(l.Line)
	}
	return n
}
