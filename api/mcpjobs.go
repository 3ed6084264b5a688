package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

// executeTask starts a job through the execute route and, with
// wait_seconds, follows it on the engine's feed (never polling the store)
// until it ends, telling the client each step change as progress and
// re-checking the caller's credential as any open stream does.
func (m *mcpCaller) executeTask(ctx context.Context, req *mcp.CallToolRequest, in executeTaskIn) (string, any, error) {
	var created wire.JobCreated
	path := "/api/workspaces/" + seg(in.Workspace) + "/tasks/" + seg(in.Task) + "/execute"
	if err := m.route(ctx, http.MethodPost, path, nil, wire.ExecuteRequest{Input: in.Input}, &created); err != nil {
		return "", nil, err
	}
	id := created.JobID
	if in.WaitSeconds <= 0 {
		return "started job " + id + "; follow it with get_job", map[string]any{"job_id": id}, nil
	}
	n := &progressNotifier{req: req}
	ended, err := m.waitJob(ctx, n, id, time.Duration(min(in.WaitSeconds, maxWaitSeconds))*time.Second)
	if err != nil {
		return "", nil, err
	}
	var d wire.JobDetail
	if err := m.route(ctx, http.MethodGet, "/api/jobs/"+seg(id), nil, nil, &d); err != nil {
		return "", nil, err
	}
	if ended {
		// A job that ended before the wait subscribed sent no change on
		// the feed: its end is still told, once.
		n.notify(ctx, "job: "+d.Status)
	}
	out := jobOutcome{JobID: id, Status: d.Status, Output: d.Output, Ended: ended}
	for _, st := range d.Steps {
		if st.Status == engine.StepFailed {
			out.FailedSteps = append(out.FailedSteps, failedStep{Step: st.StepName, Error: st.ErrorMessage})
		}
	}
	text := jobSummary(&d)
	if !ended {
		text += fmt.Sprintf("; still %s after %d seconds: follow it with get_job", d.Status, in.WaitSeconds)
	}
	return text, out, nil
}

// jobOutcome is execute_task's answer after a wait.
type jobOutcome struct {
	JobID       string         `json:"job_id"`
	Status      string         `json:"status"`
	Ended       bool           `json:"ended"` // false: the wait ran out first
	Output      map[string]any `json:"output"`
	FailedSteps []failedStep   `json:"failed_steps,omitempty"`
}

type failedStep struct {
	Step  string  `json:"step"`
	Error *string `json:"error"`
}

// waitJob waits up to wait for the job to end: true once it has, false
// when the wait ran out. Each of its step changes on the feed, and a
// keep-alive every EventsPing, is a progress notification when the
// client asked for them (a progress token).
func (m *mcpCaller) waitJob(ctx context.Context, n *progressNotifier, id string, wait time.Duration) (bool, error) {
	s := m.s
	// Subscribe, then ask whether it ended: nothing is lost in between.
	sub := s.cfg.Engine.SubscribeJobFeed(id, engine.DefaultFeedBuffer)
	defer sub.Close()
	done, err := s.cfg.Engine.JobDone(ctx, id)
	if err != nil {
		return false, m.mapped(err)
	}
	// The wait is a stream: it ends when the caller's key is revoked or
	// the job is hidden from them (ACL reload), as the log stream does.
	c, _, err := m.context(ctx, http.MethodGet, "/api/jobs/"+seg(id), nil)
	if err != nil {
		return false, err
	}
	g := s.guardStream(c, func() error {
		_, err := s.allowedJobRecord(c, accounts.View)
		return err
	})
	defer g.stop()

	timeout := time.NewTimer(wait)
	defer timeout.Stop()
	ping := time.NewTicker(s.cfg.EventsPing)
	defer ping.Stop()
	notify := func(msg string) { n.notify(ctx, msg) }
	items := sub.Items()
	report := func(it engine.FeedItem) {
		switch {
		case it.Step != nil:
			notify(fmt.Sprintf("step %s: %s", it.Step.Name, it.Step.Status))
		case it.Change == engine.JobStatusChanged:
			notify("job: " + it.Job.Status)
		}
	}
	for {
		select {
		case <-done:
			// The changes committed with the end are told before the answer.
			for {
				select {
				case it, ok := <-items:
					if ok {
						report(it)
						continue
					}
				default:
				}
				return true, nil
			}
		case <-timeout.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case it, ok := <-items:
			if !ok {
				items = nil // fell behind: the end still comes through done
				continue
			}
			report(it)
		case <-ping.C:
			notify("waiting for job " + id)
		case <-g.revoked:
			if err := m.recheck(ctx, g); err != nil {
				return false, err
			}
		case <-g.aclChanged:
			if err := m.recheck(ctx, g); err != nil {
				return false, err
			}
		case <-g.tick:
			if err := m.recheck(ctx, g); err != nil {
				return false, err
			}
		}
	}
}

// progressNotifier sends a tool call's progress notifications when the
// client asked for them (a progress token), numbered, never the same
// message twice in a row.
type progressNotifier struct {
	req  *mcp.CallToolRequest
	sent float64
	last string
}

func (n *progressNotifier) notify(ctx context.Context, msg string) {
	token := n.req.Params.GetProgressToken()
	if token == nil || msg == n.last {
		return
	}
	n.sent++
	n.last = msg
	// A client gone is seen by ctx; a lost notification is no failure.
	_ = n.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: n.sent, Message: msg})
}

// recheck re-reads the caller's credential and access to the job.
func (m *mcpCaller) recheck(ctx context.Context, g *streamGuard) error {
	if end := g.check(ctx); end != nil {
		return &toolError{status: end.status, msg: end.reason}
	}
	return nil
}

// mapped is err as the API would answer it.
func (m *mcpCaller) mapped(err error) error {
	var te *toolError
	if errors.As(err, &te) {
		return err
	}
	status, msg := m.s.classify(err)
	return &toolError{status: status, msg: msg}
}

// logPage is get_job_logs' answer: the lines, how many, and the `after`
// that continues past them.
type logPage struct {
	Lines []engine.LogLine `json:"lines"`
	Count int              `json:"count"`
	Next  int              `json:"next"`
	More  bool             `json:"more"` // after: lines remain beyond next
}

// getJobLogs reads a bounded part of a job's log after the log routes'
// own checks (logTarget, logQuery): at most maxLogLines lines, the last
// defaultLogLines unless asked otherwise. Lines were masked when written.
func (m *mcpCaller) getJobLogs(ctx context.Context, _ *mcp.CallToolRequest, in getJobLogsIn) (string, any, error) {
	page, err := m.readLog(ctx, in)
	if err != nil {
		return "", nil, err
	}
	var text strings.Builder
	fmt.Fprintf(&text, "%d lines (next: %d)\n", page.Count, page.Next)
	for _, l := range page.Lines {
		text.WriteString(formatLogLine(l))
	}
	return text.String(), page, nil
}

// formatLogLine is a line as the CLI prints it: `HH:MM:SS step | line`,
// `!` for stderr.
func formatLogLine(l engine.LogLine) string {
	sep := "|"
	if l.Stream == "stderr" {
		sep = "!"
	}
	return fmt.Sprintf("%s %s %s %s\n", l.TS.UTC().Format("15:04:05"), l.Step, sep, l.Line)
}

func (m *mcpCaller) readLog(ctx context.Context, in getJobLogsIn) (*logPage, error) {
	path := "/api/jobs/" + seg(in.JobID) + "/logs"
	if in.Step != "" {
		path = "/api/jobs/" + seg(in.JobID) + "/steps/" + seg(in.Step) + "/logs"
	}
	q := url.Values{}
	if in.Tail > 0 {
		q.Set("tail", strconv.Itoa(min(in.Tail, maxLogLines)))
	}
	if in.After != nil {
		q.Set("after", strconv.Itoa(*in.After))
	}
	c, _, err := m.context(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var page *logPage
	err = m.run(c, func(c echo.Context) error {
		jobID, step, err := m.s.logTarget(c)
		if err != nil {
			return err
		}
		lq, err := logQuery(c, step)
		if err != nil {
			return err
		}
		// A tail read is bounded by the store; a page after a line by the
		// collector, which stops the read at its limit.
		if in.After == nil && lq.Tail == 0 {
			lq.Tail = defaultLogLines
		}
		limit := lq.Tail + 1
		if in.After != nil {
			limit = defaultLogLines
			if in.Limit > 0 {
				limit = min(in.Limit, maxLogLines)
			}
		}
		w := &lineCollector{limit: limit, stream: in.Stream}
		lp, err := m.s.cfg.Logs.ReadLog(ctx, jobID, lq, w)
		if err != nil && !errors.Is(err, errEnoughLines) && !w.full {
			return err
		}
		page = &logPage{Lines: w.lines, Count: len(w.lines), Next: lp.Next}
		if w.full {
			page.Next, page.More = lq.After+w.read, true
		}
		if page.Lines == nil {
			page.Lines = []engine.LogLine{}
		}
		return nil
	})
	return page, err
}

// errEnoughLines stops a log read once the collector holds its limit.
var errEnoughLines = errors.New("enough log lines")

// lineCollector takes the JSONL lines a log read writes, up to limit read,
// keeping those of stream ("" = both).
type lineCollector struct {
	limit   int
	stream  string
	read    int
	full    bool
	partial []byte
	lines   []engine.LogLine
}

func (w *lineCollector) Write(p []byte) (int, error) {
	if w.full {
		return 0, errEnoughLines
	}
	data := append(w.partial, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		raw := data[:i]
		data = data[i+1:]
		w.read++
		var l engine.LogLine
		if json.Unmarshal(raw, &l) == nil && (w.stream == "" || l.Stream == w.stream) {
			w.lines = append(w.lines, l)
		}
		if w.read >= w.limit {
			w.full = true
			w.partial = nil
			if len(data) > 0 {
				return len(p), errEnoughLines
			}
			return len(p), nil
		}
	}
	w.partial = append([]byte(nil), data...)
	return len(p), nil
}
