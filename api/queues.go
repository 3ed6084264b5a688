package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

// listQueues answers GET /api/queues: every named queue of the config and
// every task limit in use, with the jobs holding and waiting for their
// slots that the caller may view. A task limit none of whose jobs the
// caller may view is left out; a named queue is listed with only the
// caller's visible jobs.
func (s *server) listQueues(c echo.Context) error {
	views, err := s.cfg.Engine.Queues(c.Request().Context())
	if err != nil {
		return err
	}
	visible := s.jobVisibility(c)
	out := wire.QueueList{Queues: make([]wire.Queue, 0, len(views))}
	for _, v := range views {
		q := wire.Queue{Name: v.Name, Workspace: v.Workspace, TaskName: v.Task, Key: v.Key, Limit: v.Limit,
			Running: queueJobs(v.Running, visible), Queued: queueJobs(v.Queued, visible)}
		if v.Name == "" && len(q.Running)+len(q.Queued) == 0 {
			continue
		}
		out.Queues = append(out.Queues, q)
	}
	return c.JSON(http.StatusOK, out)
}

func queueJobs(jobs []engine.QueuedJob, visible func(workspace, accessPath string) bool) []wire.QueueJob {
	out := make([]wire.QueueJob, 0, len(jobs))
	for _, j := range jobs {
		if visible != nil && !visible(j.Workspace, j.AccessPath) {
			continue
		}
		out = append(out, wire.QueueJob{JobID: j.JobID, Workspace: j.Workspace, TaskName: j.TaskName, Priority: j.Priority,
			Position: j.Position, CreatedAt: j.CreatedAt.UTC(), Since: httpx.UTCPtr(j.Since)})
	}
	return out
}

// setPriority answers POST /api/jobs/{id}/priority: an admin (anyone with
// auth off) moves a queued job in line. It answers the job as the lists
// show it, with its new place.
func (s *server) setPriority(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if s.auth != nil {
		if p := auth.Caller(c); p == nil || !p.User.IsAdmin {
			// A job hidden from the caller is not found, as anywhere.
			if err := s.checkJob(c, accounts.View); err != nil {
				return err
			}
			return forbidden("only an admin may change a queued job's priority")
		}
	}
	var req wire.PriorityRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.Priority == nil {
		return httpx.BadRequest("priority: required (an integer from -100 to 100, higher starts first)")
	}
	j, err := s.cfg.Engine.SetPriority(c.Request().Context(), id, *req.Priority)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, jobOf(j))
}
