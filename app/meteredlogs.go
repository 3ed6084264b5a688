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
	n := 0
	for _, l := range lines {
		n += len(l.Line)
	}
	if err := m.serverLogs.Append(jobID, lines); err != nil {
		return err
	}
	m.metrics.LogAppended(n)
	return nil
}
