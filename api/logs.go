package api

import (
	"bufio"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/engine"
)

// GET /api/jobs/{id}/logs and /steps/{step}/logs answer the spec's
// {"logs": "..."} plus `lines`, how many lines `logs` holds, and `next`,
// the `after` that continues from there. The body is written as the log is
// read, so a big log costs the server a buffer, not its size.

func (s *server) jobLogs(c echo.Context) error {
	id, step, err := s.logTarget(c)
	if err != nil {
		return err
	}
	return s.writeLogs(c, id, step)
}

// stepLogs is jobLogs: the route's `step` parameter narrows the log.
func (s *server) stepLogs(c echo.Context) error { return s.jobLogs(c) }

// logTarget is the job (`id`) whose log the caller may read, and the step
// (`step`, "" for the whole log) that must exist in it: the check of the
// log routes, which the MCP tool and resource share.
func (s *server) logTarget(c echo.Context) (jobID, step string, err error) {
	job, err := s.allowedJobRecord(c, accounts.View)
	if err != nil {
		return "", "", err
	}
	step = c.Param("step")
	if step != "" && step != engine.ServerStep {
		found, err := s.cfg.Engine.HasStep(c.Request().Context(), job.ID, step)
		if err != nil {
			return "", "", err
		}
		if !found {
			return "", "", httpx.NotFound("step %q in job %s", step, job.ID)
		}
	}
	return job.ID, step, nil
}

// logQuery reads `tail` (the last N lines) and `after` (the lines after
// line N, counting from 1, as `next` of the previous answer gives it).
func logQuery(c echo.Context, step string) (engine.LogQuery, error) {
	q := engine.LogQuery{Step: step}
	tail, after := c.QueryParam("tail"), c.QueryParam("after")
	if tail != "" && after != "" {
		return q, httpx.BadRequest("tail and after cannot be combined: use tail for the last lines, then after=next for the ones that follow")
	}
	if tail != "" {
		n, err := strconv.Atoi(tail)
		if err != nil || n < 1 {
			return q, httpx.BadRequest("tail must be a positive number of lines, got %q", tail)
		}
		q.Tail = n
	}
	if after != "" {
		n, err := strconv.Atoi(after)
		if err != nil || n < 0 {
			return q, httpx.BadRequest("after must be a line number (0 or more), got %q", after)
		}
		q.After = n
	}
	return q, nil
}

func (s *server) writeLogs(c echo.Context, jobID, step string) error {
	q, err := logQuery(c, step)
	if err != nil {
		return err
	}
	body := &logsBody{res: c.Response()}
	page, err := s.cfg.Logs.ReadLog(c.Request().Context(), jobID, q, body)
	if err == nil {
		err = body.finish(page)
	}
	if err == nil {
		return nil
	}
	if !body.started {
		return err
	}
	// Half an answer is out: cut the connection so the client sees a
	// broken body, not a short log that parses.
	if body.out.err == nil {
		s.log.Error("job log read failed mid-answer", "job", jobID, "err", err)
	}
	panic(http.ErrAbortHandler)
}

// logsBody writes the answer as ReadLog hands it lines: the status and
// the opening on the first write (so an error before it is still a JSON
// error), then the lines as one JSON string.
type logsBody struct {
	res     *echo.Response
	out     stickyWriter
	buf     *bufio.Writer
	str     jsonString
	started bool
}

func (b *logsBody) start() {
	b.started = true
	b.res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	b.res.WriteHeader(http.StatusOK)
	b.out.w = b.res
	b.buf = bufio.NewWriterSize(&b.out, 32<<10)
	b.str.w = b.buf
	b.buf.WriteString(`{"logs":"`)
}

func (b *logsBody) Write(p []byte) (int, error) {
	if !b.started {
		b.start()
	}
	b.str.Write(p)
	if b.out.err != nil {
		return 0, b.out.err
	}
	return len(p), nil
}

func (b *logsBody) finish(page engine.LogPage) error {
	if !b.started {
		b.start()
	}
	b.str.end()
	b.buf.WriteString(`","lines":` + strconv.Itoa(page.Lines) + `,"next":` + strconv.Itoa(page.Next) + "}\n")
	return b.buf.Flush()
}

// stickyWriter keeps the first write error, so writers above it that do
// not return errors can be asked afterwards.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	s.err = err
	return n, err
}
