package app

import (
	"context"

	"github.com/appliance-sh/appliance/engine"
)

// secretSource lists the values a job's log must not show.
type secretSource interface {
	SecretValues(ctx context.Context, jobID string) ([]string, error)
}

// maskingLogs writes every line through with the job's secret values
// replaced by ***: secret inputs, secret connection properties and the
// workspace's secrets never reach a log file, a live viewer or the archive.
// secrets is set once the engine exists (the engine writes through this too).
type maskingLogs struct {
	serverLogs
	secrets secretSource
}

func (m *maskingLogs) Append(jobID string, lines []engine.LogLine) error {
	values, err := m.secrets.SecretValues(context.Background(), jobID)
	if err != nil || len(values) == 0 {
		// An unknown job has no secrets to mask; its lines pass as they are.
		return m.serverLogs.Append(jobID, lines)
	}
	masked := make([]engine.LogLine, len(lines))
	for i, l := range lines {
		l.Line = engine.Mask(l.Line, values)
		masked[i] = l
	}
	return m.serverLogs.Append(jobID, masked)
}

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
