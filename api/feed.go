package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

// eventsRoute is the job feed's SSE stream; like the log stream it may carry
// its token as ?token=, since a browser's EventSource cannot set headers.
const eventsRoute = "/api/events"

// feedItem is the data of a `job` event: the job's list fields (as in GET
// /api/jobs) and what changed.
type feedItem struct {
	Change string `json:"change"`
	wire.Job
}

// feedStep is the data of a `step` event: a step of the followed job
// changed status, attempt or retry time.
type feedStep struct {
	JobID       string     `json:"job_id"`
	Workspace   string     `json:"workspace"`
	TaskName    string     `json:"task_name"`
	StepName    string     `json:"step_name"`
	Status      string     `json:"status"`
	WorkerID    *string    `json:"worker_id"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Attempt     int        `json:"attempt"`
	RetryAt     *time.Time `json:"retry_at,omitempty"`
}

// streamFeed serves GET /api/events, a Server-Sent Events stream of job
// changes once committed: `ready` when subscribed, then a `job` event per
// job created ("change": "created") or changed status ("status"), only of
// the jobs the caller may view. With ?job_id= it follows that one job:
// its `job` events and a `step` event per step changing status, attempt
// or retry time (404 for a job the caller may not view). A client that falls behind gets `resync`
// (events were dropped: reload the lists) and the stream goes on. The
// stream re-checks its caller (streamguard.go): it filters by their groups
// and the ACL in force, and ends with `revoked` when their credential is
// gone (status 401) or the followed job is no longer theirs to view (403).
func (s *server) streamFeed(c echo.Context) error {
	if !headerHasToken(c.Request().Header, "Accept", "text/event-stream") {
		return echo.NewHTTPError(http.StatusNotAcceptable,
			"this endpoint is a Server-Sent Events stream: send Accept: text/event-stream (an EventSource does)")
	}
	// An idle stream sends a comment every EventsPing, so proxies keep it
	// open and a vanished client is noticed.
	visible := s.jobVisibility(c)
	ctx := c.Request().Context()
	subscribe := func() *engine.FeedSubscription { return s.cfg.Engine.SubscribeFeed(0) }
	// followable tells whether the caller may still view the followed job.
	followable := func() error { return nil }
	if id := c.QueryParam("job_id"); id != "" {
		if !httpx.IsUUID(id) {
			return httpx.NotFound("job %q", id)
		}
		job, err := s.cfg.Engine.JobRecord(ctx, id)
		if err != nil {
			return err
		}
		followable = func() error {
			if v := s.jobVisibility(c); v != nil && !v(job.Workspace, job.AccessPath) {
				return jobNotFound(id)
			}
			return nil
		}
		if err := followable(); err != nil {
			return err
		}
		// A big for_each job's instances change by the thousand: a
		// roomier buffer, and a follower that still falls behind gets
		// `resync` (refetch the job) as any other.
		subscribe = func() *engine.FeedSubscription { return s.cfg.Engine.SubscribeJobFeed(id, 4*engine.DefaultFeedBuffer) }
	}
	sub := subscribe()
	defer func() { sub.Close() }()

	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events through as they come
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(frame string) bool {
		// A client that stops reading is let go after the write timeout.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		if _, err := w.Write([]byte(frame)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\nevent: ready\ndata: {}\n\n") {
		return nil
	}
	ping := time.NewTicker(s.cfg.EventsPing)
	defer ping.Stop()
	guard := s.guardStream(c, followable)
	defer guard.stop()
	// recheck reports whether the stream goes on, with the caller's
	// filter as it is now; if not, it has told the client why.
	recheck := func() bool {
		end := guard.check(ctx)
		if end == nil {
			visible = s.jobVisibility(c)
			return true
		}
		data, _ := json.Marshal(struct {
			Status int    `json:"status"`
			Reason string `json:"reason"`
		}{end.status, end.reason})
		send(fmt.Sprintf("event: revoked\ndata: %s\n\n", data))
		return false
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-guard.revoked:
			if !recheck() {
				return nil
			}
		case <-guard.aclChanged:
			if !recheck() {
				return nil
			}
		case <-guard.tick:
			if !recheck() {
				return nil
			}
		case <-ping.C:
			if !send(": ping\n\n") {
				return nil
			}
		case ev, ok := <-sub.Items():
			if !ok {
				if !sub.Lost() {
					return nil
				}
				// Dropped for falling behind: start afresh, and say so.
				sub = subscribe()
				if !send("event: resync\ndata: {}\n\n") {
					return nil
				}
				continue
			}
			if guard.due() && !recheck() {
				return nil
			}
			if visible != nil && !visible(ev.Job.Workspace, ev.Job.AccessPath) {
				continue
			}
			name, data, err := "job", []byte(nil), error(nil)
			if st := ev.Step; st != nil {
				name = "step"
				data, err = json.Marshal(feedStep{
					JobID: ev.Job.ID, Workspace: ev.Job.Workspace, TaskName: ev.Job.TaskName,
					StepName: st.Name, Status: st.Status, WorkerID: st.WorkerID,
					StartedAt: st.StartedAt, CompletedAt: st.CompletedAt, Attempt: st.Attempt, RetryAt: st.RetryAt,
				})
			} else {
				data, err = json.Marshal(feedItem{Change: ev.Change, Job: jobOf(&ev.Job)})
			}
			if err != nil {
				s.log.Error("encode job event", "job", ev.Job.ID, "err", err)
				continue
			}
			if !send(fmt.Sprintf("event: %s\ndata: %s\n\n", name, data)) {
				return nil
			}
		}
	}
}
