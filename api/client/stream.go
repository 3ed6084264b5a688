package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
)

// The close codes of a log stream (api/stream.go) besides a normal close
// once the job's log is complete.
const (
	// StreamFellBehind: the reader fell behind and was dropped; it may
	// reconnect.
	StreamFellBehind = websocket.StatusTryAgainLater
	// StreamCredentialGone: the caller's credential was revoked or expired.
	StreamCredentialGone websocket.StatusCode = 4401
	// StreamAccessLost: the job is no longer visible to the caller.
	StreamAccessLost websocket.StatusCode = 4403
)

// StreamLog reads one connection of a job's live log
// (GET /api/jobs/{id}/logs/stream) to its end, handing write each frame
// (JSON log lines), and returns the close status: websocket.StatusNormalClosure
// once the job ended and its log is complete, -1 when it ended without a
// close frame. With after >= 0 the stream starts after that line of the
// log. A refused upgrade is the API's answer, as an *Error.
func (c *Client) StreamLog(ctx context.Context, jobID string, after int, write func([]byte)) (websocket.StatusCode, error) {
	query := ""
	if after >= 0 {
		query = "?after=" + strconv.Itoa(after)
	}
	conn, resp, err := websocket.Dial(ctx, c.base+"/api/jobs/"+url.PathEscape(jobID)+"/logs/stream"+query, &websocket.DialOptions{
		HTTPClient: c.http,
		HTTPHeader: Header(c.bearer(ctx)),
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			// A refused upgrade is a plain API answer, e.g. 404 for an
			// unknown job; Dial keeps the start of its body.
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			err := ErrorOfAnswer(resp.StatusCode, body)
			if resp.StatusCode == http.StatusUnauthorized {
				err = c.withHint(err)
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
		write(data)
	}
}

// CloseReason is the reason of the close frame err carries.
func CloseReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}

// LoginHint is the client's hint for a 401 ("" = none).
func (c *Client) LoginHint() string { return c.hint }
