package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
)

// serverStep is the step name of the server's own log lines.
const serverStep = "_server"

// maxStreamReconnects bounds how often a viewer that keeps falling behind
// starts over; each reconnect resends the whole log.
const maxStreamReconnects = 5

// followJobLog is followLog with the step column sized up front from the
// job's steps, so lines of later steps stay aligned with earlier ones. It
// answers 404 for an unknown job before any stream is opened.
func (c *apiClient) followJobLog(ctx context.Context, jobID string, p *logPrinter) error {
	return c.followJobLogTail(ctx, jobID, 0, p)
}

// followJobLogTail is followJobLog starting at the job's last tail lines
// (0 = from its start).
func (c *apiClient) followJobLogTail(ctx context.Context, jobID string, tail int, p *logPrinter) error {
	job, _, err := c.job(ctx, jobID)
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
		var last struct {
			Next int `json:"next"`
		}
		if _, err := c.get(ctx, "/api/jobs/"+url.PathEscape(jobID)+"/logs?tail=1", &last); err != nil {
			return err
		}
		after = max(0, last.Next-tail)
	}
	return c.followLog(ctx, jobID, after, p)
}

// followLog prints the job's log from the live stream
// (GET /api/jobs/{id}/logs/stream) until the server closes it normally,
// which it does once the job has ended and its log is complete. With after
// >= 0 the stream starts after that line of the log.
func (c *apiClient) followLog(ctx context.Context, jobID string, after int, p *logPrinter) error {
	for attempt := 0; ; attempt++ {
		query := ""
		if after >= 0 {
			query = "?after=" + strconv.Itoa(after)
		}
		code, err := c.streamOnce(ctx, jobID, query, p)
		switch {
		case code == websocket.StatusNormalClosure:
			p.flush()
			return nil
		case code == websocket.StatusTryAgainLater && attempt < maxStreamReconnects && after >= 0:
			// We fell behind and were dropped: resume after the last
			// whole line shown.
			after += p.seen
			p.seen, p.partial = 0, nil
		case code == websocket.StatusTryAgainLater && attempt < maxStreamReconnects:
			// We fell behind and were dropped: the server resends the log
			// from its start, and the printer skips what it has shown.
			p.restart()
		case code == streamCredentialGone || code == streamAccessLost:
			// Ended for good: the credential is gone, or the job is no
			// longer visible to this user (the reason says which).
			ae := &apiError{Status: http.StatusUnauthorized, Message: "the server ended the log stream: " + closeReason(err)}
			if code == streamAccessLost {
				ae.Status = http.StatusForbidden
				return fmt.Errorf("follow the log of job %s: %w", jobID, ae)
			}
			return fmt.Errorf("follow the log of job %s: %w", jobID, c.loginHint(ae))
		case err != nil:
			return fmt.Errorf("follow the log of job %s: %w", jobID, err)
		default:
			return fmt.Errorf("follow the log of job %s: stream closed with status %d", jobID, code)
		}
	}
}

// The close codes of a log stream whose caller lost it (api/stream.go).
const (
	streamCredentialGone websocket.StatusCode = 4401
	streamAccessLost     websocket.StatusCode = 4403
)

// closeReason is the reason of the close frame err carries.
func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}

// streamOnce reads one connection to its end and returns its close status
// (-1 when it ended without a close frame).
func (c *apiClient) streamOnce(ctx context.Context, jobID, query string, p *logPrinter) (websocket.StatusCode, error) {
	conn, resp, err := websocket.Dial(ctx, c.base+"/api/jobs/"+url.PathEscape(jobID)+"/logs/stream"+query, &websocket.DialOptions{
		HTTPClient: c.http,
		HTTPHeader: header(c.bearer(ctx)),
	})
	if err != nil {
		if resp != nil && resp.StatusCode != 101 {
			// A refused upgrade is a plain API answer, e.g. 404 for an
			// unknown job; Dial keeps the start of its body.
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			err := errorOfAnswer(resp.StatusCode, body)
			if resp.StatusCode == http.StatusUnauthorized {
				err = c.loginHint(err)
			}
			return -1, err
		}
		return -1, c.transportError(err)
	}
	defer conn.CloseNow()
	// The backfill of a long log arrives as one frame.
	conn.SetReadLimit(-1)
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			code := websocket.CloseStatus(err)
			if code == -1 && ctx.Err() != nil {
				return -1, ctx.Err()
			}
			if code == -1 && errors.Is(err, io.EOF) {
				return -1, errors.New("connection closed without a close frame")
			}
			return code, err
		}
		p.write(data)
	}
}
