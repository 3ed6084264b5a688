package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
)

func (s *server) listJobs(c echo.Context) error {
	limit, offset, err := page(c)
	if err != nil {
		return err
	}
	f := engine.JobFilter{Workspace: c.QueryParam("workspace"), TaskName: c.QueryParam("task_name"), Limit: limit, Offset: offset,
		Visible: s.jobVisibility(c)}
	if f.TaskName != "" && f.Workspace == "" {
		return badRequest("task_name requires workspace")
	}
	jobs, total, err := s.cfg.Engine.Jobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := list[jobItem]{Items: make([]jobItem, len(jobs)), Total: total}
	for i, j := range jobs {
		out.Items[i] = jobItemOf(j)
	}
	return c.JSON(http.StatusOK, out)
}

// job loads the job named by the `id` path parameter.
func (s *server) job(c echo.Context) (*engine.Job, []*engine.Step, error) {
	id, err := jobIDParam(c)
	if err != nil {
		return nil, nil, err
	}
	return s.cfg.Engine.Job(c.Request().Context(), id)
}

// getJob shows a job with its secret values masked as in its log (the
// interface: secret inputs are masked in the UI, which shows this).
func (s *server) getJob(c echo.Context) error {
	job, steps, err := s.allowedJob(c, accounts.View)
	if err != nil {
		return err
	}
	// A job whose workspace is no longer loaded has no definitions to say
	// what is secret; it shows as stored (its log was masked when written).
	secrets, err := s.cfg.Engine.SecretsOf(job, steps)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	d := jobDetailOf(job, steps).masked(secrets)
	d.Permission = s.permissionField(s.permissionByName(c, job.Workspace, job.TaskName))
	return c.JSON(http.StatusOK, d)
}

func (s *server) cancelJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := s.checkJob(c, accounts.Run); err != nil {
		return err
	}
	if err := s.cfg.Engine.CancelJob(c.Request().Context(), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": engine.JobCancelled})
}

// rerunRequest is the optional body of POST /api/jobs/{id}/rerun.
type rerunRequest struct {
	Input      map[string]any `json:"input"` // absent or null: the old job's input
	FromFailed bool           `json:"from_failed"`
}

// rerunJob starts a new job of the job's task on the current revision
// (DESIGN.md "Operations"). Its source is the caller, as for an execute.
func (s *server) rerunJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := s.checkJob(c, accounts.Run); err != nil {
		return err
	}
	var req rerunRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	sourceType, sourceID := jobSource(c)
	job, err := s.cfg.Engine.CreateJob(c.Request().Context(), engine.CreateJob{
		Input:      req.Input,
		Strict:     req.Input != nil, // given input is typed by a person, as on execute
		SourceType: sourceType,
		SourceID:   sourceID,
		Rerun:      &engine.Rerun{JobID: id, FromFailed: req.FromFailed},
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"job_id": job.ID})
}

// approveRequest is the body of POST /api/jobs/{id}/steps/{step}/approve.
type approveRequest struct {
	Approved        *bool          `json:"approved"`
	Input           map[string]any `json:"input"`
	RejectionReason string         `json:"rejection_reason"`
}

// approveStep answers a waiting approval step (DESIGN.md "Approval API").
// The approver is the user's email, or "anonymous" with auth off.
func (s *server) approveStep(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := s.checkJob(c, accounts.Run); err != nil {
		return err
	}
	var req approveRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Approved == nil {
		return echo.NewHTTPError(http.StatusBadRequest, `"approved" (true or false) is required`)
	}
	err = s.cfg.Engine.Approve(c.Request().Context(), id, c.Param("step"), engine.Approval{
		Approved:        *req.Approved,
		By:              actorName(c),
		Input:           req.Input,
		RejectionReason: req.RejectionReason,
	})
	if err != nil {
		return err
	}
	status := "rejected"
	if *req.Approved {
		status = "approved"
	}
	return c.JSON(http.StatusOK, map[string]string{"status": status})
}

func hasStep(steps []*engine.Step, name string) bool {
	for _, s := range steps {
		if s.Name == name {
			return true
		}
	}
	return false
}
