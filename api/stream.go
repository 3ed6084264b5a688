package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
)

// Timing of the live log stream.
const (
	// streamFinishGrace is how long after the job ends the stream waits
	// for the log store to flush and close it before closing by itself.
	streamFinishGrace = 5 * time.Second
)

// streamLogs serves GET /api/jobs/{id}/logs/stream: the log so far as the
// first text frame (skipped when empty), then each appended chunk of JSONL
// lines as one text frame. It closes with 1000 once the job is terminal and
// its log complete, and with 1013 (try again later) when the viewer fell
// too far behind; reconnecting gives a fresh backfill. `tail` or `after`,
// as on GET .../logs, make the backfill the last lines or those after a
// line, so a viewer of a big log need not load it all. It re-checks its
// caller (streamguard.go) and closes with 4401 when their credential is
// gone, 4403 when the job is no longer theirs to view.
func (s *server) streamLogs(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	q, err := logQuery(c, "")
	if err != nil {
		return err
	}
	r := c.Request()
	ctx := r.Context()
	// Answer 404 as JSON before upgrading: a refused upgrade is just HTTP.
	if _, err := s.allowedJobRecord(c, accounts.View); err != nil {
		return err
	}
	if !isWebSocketUpgrade(r) {
		c.Response().Header().Set("Upgrade", "websocket")
		return echo.NewHTTPError(http.StatusUpgradeRequired,
			"this endpoint is a WebSocket: connect with a WebSocket client (Connection: Upgrade, Upgrade: websocket)")
	}
	// Browsers let any page open a WebSocket anywhere, and the log may hold
	// what a step printed: another origin's page gets nothing.
	if origin := r.Header.Get("Origin"); origin != "" && !s.guard.sameOrAllowedOrigin(r, origin) {
		return echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf(
			"cross-origin WebSocket from %q refused: add the origin to allowed_origins in the server config to allow it", origin))
	}
	done, err := s.cfg.Engine.JobDone(ctx, id)
	if err != nil {
		return err
	}
	hw := &handshakeWriter{ResponseWriter: c.Response()}
	// Accept checks the origin again (same host, or allowed_origins).
	conn, err := websocket.Accept(hw, r, &websocket.AcceptOptions{OriginPatterns: s.guard.originPatterns()})
	if err != nil {
		s.log.Debug("websocket accept", "job", id, "err", err)
		if hw.status == 0 {
			return nil // the upgrade itself failed: the connection is gone
		}
		c.Response().Header().Del(echo.HeaderContentType)
		return echo.NewHTTPError(hw.status, strings.TrimSpace(hw.refusal.String()))
	}
	defer conn.CloseNow()
	// Viewers send nothing; reading only notices their hang-up.
	ctx = conn.CloseRead(ctx)

	guard := s.guardStream(c, func() error {
		_, err := s.allowedJobRecord(c, accounts.View)
		return err
	})
	defer guard.stop()
	code, reason := s.pump(ctx, conn, id, q, done, guard)
	if code != 0 {
		_ = conn.Close(code, reason)
	}
	return nil
}

// isWebSocketUpgrade reports whether r asks for a WebSocket at all; the
// other handshake details are Accept's to check.
func isWebSocketUpgrade(r *http.Request) bool {
	return r.ProtoAtLeast(1, 1) && headerHasToken(r.Header, "Connection", "upgrade") &&
		headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// handshakeWriter holds back a refusal websocket.Accept writes (as plain
// text) so the handler can answer it as JSON; a successful upgrade goes
// through, and Unwrap lets Accept reach the Hijacker beneath.
type handshakeWriter struct {
	http.ResponseWriter
	status  int
	refusal bytes.Buffer
}

func (w *handshakeWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *handshakeWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.refusal.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *handshakeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Close codes of a log stream whose caller lost it: the credential is gone
// (sign in again), or the job is no longer theirs to view.
const (
	closeCredentialGone websocket.StatusCode = 4401
	closeAccessLost     websocket.StatusCode = 4403
)

// pump sends the backfill and the live chunks, and returns the close code
// (0 when the viewer went away first). It re-checks the caller when guard
// says so, and closes as the check says.
func (s *server) pump(ctx context.Context, conn *websocket.Conn, id string, q engine.LogQuery, done <-chan struct{},
	guard *streamGuard) (websocket.StatusCode, string) {
	// Subscribing first, then checking the job, leaves no gap: a job that
	// ended before the subscription has its whole log in the backfill.
	backfill, updates, cancel, err := s.cfg.Logs.Subscribe(id, q)
	if err != nil {
		s.log.Error("subscribe to job log", "job", id, "err", err)
		return websocket.StatusInternalError, "cannot read the job log"
	}
	defer cancel()
	err = s.sendBackfill(ctx, conn, backfill)
	backfill.Close()
	var readErr backfillReadError
	if errors.As(err, &readErr) {
		s.log.Error("read job log backfill", "job", id, "err", err)
		return websocket.StatusInternalError, "cannot read the job log"
	}
	if err != nil {
		return 0, ""
	}
	if s.terminal(ctx, id) {
		// Lines appended since the backfill was taken are queued: every
		// line of an ended job is in the log by the time it ended.
		for {
			select {
			case chunk, ok := <-updates:
				if !ok {
					return websocket.StatusNormalClosure, "job finished"
				}
				if err := s.write(ctx, conn, chunk); err != nil {
					return 0, ""
				}
			default:
				return websocket.StatusNormalClosure, "job finished"
			}
		}
	}

	// lost re-checks the caller: the close code and reason when the
	// stream must end, 0 when it goes on.
	lost := func() (websocket.StatusCode, string) {
		switch end := guard.check(ctx); {
		case end == nil:
			return 0, ""
		case end.status == http.StatusForbidden:
			return closeAccessLost, end.reason
		default:
			return closeCredentialGone, end.reason
		}
	}
	var grace <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return 0, ""
		case <-guard.revoked:
			if code, reason := lost(); code != 0 {
				return code, reason
			}
		case <-guard.aclChanged:
			if code, reason := lost(); code != 0 {
				return code, reason
			}
		case <-guard.tick:
			if code, reason := lost(); code != 0 {
				return code, reason
			}
		case <-done:
			done = nil
			timer := time.NewTimer(streamFinishGrace)
			defer timer.Stop()
			grace = timer.C
		case <-grace:
			return websocket.StatusNormalClosure, "job finished"
		case chunk, ok := <-updates:
			if !ok {
				// Closed either because the log is complete or because this
				// viewer fell behind; the job's state tells which.
				if s.terminal(ctx, id) {
					return websocket.StatusNormalClosure, "job finished"
				}
				return websocket.StatusTryAgainLater, "viewer too slow; reconnect for the full log"
			}
			if guard.due() {
				if code, reason := lost(); code != 0 {
					return code, reason
				}
			}
			if err := s.write(ctx, conn, chunk); err != nil {
				return 0, ""
			}
		}
	}
}

// backfillFrame is the most a backfill frame holds: a big log goes out in
// frames of whole lines (a longer line is split), read as they are sent.
const backfillFrame = 1 << 20

// backfillReadError is a backfill that could not be read, as opposed to
// a viewer that went away.
type backfillReadError struct{ error }

// sendBackfill sends the log so far; an empty one sends nothing.
func (s *server) sendBackfill(ctx context.Context, conn *websocket.Conn, r io.Reader) error {
	buf := make([]byte, 0, backfillFrame)
	for {
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			if len(buf) == 0 {
				return nil
			}
			return s.write(ctx, conn, buf)
		}
		if err != nil {
			return backfillReadError{err}
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		if cut == 0 {
			cut = len(buf)
		}
		if err := s.write(ctx, conn, buf[:cut]); err != nil {
			return err
		}
		buf = buf[:copy(buf, buf[cut:])]
	}
}

func (s *server) write(ctx context.Context, conn *websocket.Conn, data []byte) error {
	// A viewer that stops reading is dropped by the log store anyway; the
	// timeout frees this goroutine.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StreamWriteTimeout)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, data)
}

// terminal reports whether the job has ended, as committed.
func (s *server) terminal(ctx context.Context, id string) bool {
	job, err := s.cfg.Engine.JobRecord(ctx, id)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("job state for log stream", "job", id, "err", err)
		}
		return false
	}
	return engine.JobTerminal(job.Status)
}
