package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

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
// too far behind; reconnecting gives a fresh backfill.
func (s *server) streamLogs(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	r := c.Request()
	ctx := r.Context()
	// Answer 404 as JSON before upgrading: a refused upgrade is just HTTP.
	if _, _, err := s.cfg.Engine.Job(ctx, id); err != nil {
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

	code, reason := s.pump(ctx, conn, id, done)
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

// pump sends the backfill and the live chunks, and returns the close code
// (0 when the viewer went away first).
func (s *server) pump(ctx context.Context, conn *websocket.Conn, id string, done <-chan struct{}) (websocket.StatusCode, string) {
	// Subscribing first, then checking the job, leaves no gap: a job that
	// ended before the subscription has its whole log in the backfill.
	backfill, updates, cancel, err := s.cfg.Logs.Subscribe(id)
	if err != nil {
		s.log.Error("subscribe to job log", "job", id, "err", err)
		return websocket.StatusInternalError, "cannot read the job log"
	}
	defer cancel()
	if len(backfill) > 0 {
		if err := s.write(ctx, conn, backfill); err != nil {
			return 0, ""
		}
	}
	if s.terminal(ctx, id) {
		return websocket.StatusNormalClosure, "job finished"
	}

	var grace <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return 0, ""
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
			if err := s.write(ctx, conn, chunk); err != nil {
				return 0, ""
			}
		}
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
	job, _, err := s.cfg.Engine.Job(ctx, id)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("job state for log stream", "job", id, "err", err)
		}
		return false
	}
	return engine.JobTerminal(job.Status)
}
