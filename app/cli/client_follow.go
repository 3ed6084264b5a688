package cli

import (
	"context"
	"fmt"
	"net/http"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/api/client"
)

// serverStep is the step name of the server's own log lines.
const serverStep = "_server"

// maxStreamReconnects bounds how often a viewer that keeps falling behind
// starts over; each reconnect resends the whole log.
const maxStreamReconnects = 5

// followJobLog is followLog with the step column sized up front from the
// job's steps, so lines of later steps stay aligned with earlier ones. It
// answers 404 for an unknown job before any stream is opened.
func followJobLog(ctx context.Context, c *client.Client, jobID string, p *logPrinter) error {
	return followJobLogTail(ctx, c, jobID, 0, p)
}

// followJobLogTail is followJobLog starting at the job's last tail lines
// (0 = from its start).
func followJobLogTail(ctx context.Context, c *client.Client, jobID string, tail int, p *logPrinter) error {
	job, _, err := c.Job(ctx, jobID)
	if err != nil {
		return err
	}
	known := p.step == "" || p.step == serverStep
	for _, s := range job.Steps {
		if p.step == "" || s.StepName == p.step {
			p.width = max(p.width, len(s.StepName))
			known = true
		}
	}
	if !known {
		// Said now: a misspelt step would otherwise print nothing until
		// the job ends.
		return fmt.Errorf("job %s has no step %q", jobID, p.step)
	}
	after := -1
	if tail > 0 {
		// The stream counts the job's lines; start it tail lines before the
		// end, a position it can also resume from.
		last, _, err := c.Logs(ctx, jobID, client.LogQuery{Tail: 1})
		if err != nil {
			return err
		}
		after = max(0, last.Next-tail)
	}
	return followLog(ctx, c, jobID, after, p)
}

// followLog prints the job's log from the live stream
// (GET /api/jobs/{id}/logs/stream) until the server closes it normally,
// which it does once the job has ended and its log is complete. With after
// >= 0 the stream starts after that line of the log.
func followLog(ctx context.Context, c *client.Client, jobID string, after int, p *logPrinter) error {
	for attempt := 0; ; attempt++ {
		code, err := c.StreamLog(ctx, jobID, after, p.write)
		switch {
		case code == websocket.StatusNormalClosure:
			p.flush()
			return nil
		case code == client.StreamFellBehind && attempt < maxStreamReconnects && after >= 0:
			// We fell behind and were dropped: resume after the last
			// whole line shown.
			after += p.seen
			p.seen, p.partial = 0, nil
		case code == client.StreamFellBehind && attempt < maxStreamReconnects:
			// We fell behind and were dropped: the server resends the log
			// from its start, and the printer skips what it has shown.
			p.restart()
		case code == client.StreamCredentialGone || code == client.StreamAccessLost:
			// Ended for good: the credential is gone, or the job is no
			// longer visible to this user (the reason says which).
			ae := &client.Error{Status: http.StatusUnauthorized, Message: "the server ended the log stream: " + client.CloseReason(err)}
			if code == client.StreamAccessLost {
				ae.Status = http.StatusForbidden
				return fmt.Errorf("follow the log of job %s: %w", jobID, ae)
			}
			ae.Hint = c.LoginHint()
			return fmt.Errorf("follow the log of job %s: %w", jobID, ae)
		case err != nil:
			return fmt.Errorf("follow the log of job %s: %w", jobID, err)
		default:
			return fmt.Errorf("follow the log of job %s: stream closed with status %d", jobID, code)
		}
	}
}
