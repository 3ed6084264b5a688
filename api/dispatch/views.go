package dispatch

import (
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
)

// assignmentOf is the wire form of a claimed step.
func assignmentOf(c *engine.Claim) *workerproto.Assignment {
	a := &workerproto.Assignment{
		JobID:       c.JobID,
		Workspace:   c.Workspace,
		Revision:    c.Revision,
		StepName:    c.StepName,
		ActionName:  c.ActionName,
		ActionType:  c.ActionType,
		Runner:      c.Runner,
		ActionSpec:  c.Spec,
		Input:       object(c.Input),
		TimeoutSecs: c.Timeout.Seconds(),
		EventSource: c.EventSource,
	}
	if c.Image != "" {
		img := c.Image
		a.ActionImage = &img
	}
	return a
}

// logLinesAt stamps pushed lines with their step; a line without a
// timestamp gets the time it arrived, now.
func logLinesAt(step string, lines []workerproto.LogLine, now time.Time) []engine.LogLine {
	out := make([]engine.LogLine, len(lines))
	for i, l := range lines {
		ts := l.TS
		if ts.IsZero() {
			ts = now
		}
		out[i] = engine.LogLine{TS: ts.UTC(), Stream: l.Stream, Step: step, Line: l.Line, Seq: l.Seq}
	}
	return out
}

// object is m, or an empty object for nil: the wire never says null there.
func object(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
