package api

import (
	"errors"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

func (s *server) listJobs(c echo.Context) error {
	f, err := jobFilterOf(c)
	if err != nil {
		return err
	}
	f.Visible = s.jobVisibility(c)
	limit := f.Limit
	f.Limit++ // one more tells whether a next page exists
	jobs, total, err := s.cfg.Engine.Jobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := wire.JobList{Total: total}
	if len(jobs) > limit {
		jobs = jobs[:limit]
		if !f.Queued { // the line is paged by offset
			next := engine.CursorOf(jobs[limit-1])
			out.NextCursor = &next
		}
	}
	out.Items = make([]wire.Job, len(jobs))
	for i, j := range jobs {
		out.Items[i] = jobOf(j)
	}
	return c.JSON(http.StatusOK, out)
}

// jobFilterOf reads the list query: the interface's workspace, task_name,
// limit and offset, and our status (comma-separated), source_type and
// cursor (DESIGN.md "Lists: filters and cursors").
func jobFilterOf(c echo.Context) (engine.JobFilter, error) {
	limit, offset, err := httpx.Page(c)
	if err != nil {
		return engine.JobFilter{}, err
	}
	f := engine.JobFilter{
		Workspace:  c.QueryParam("workspace"),
		TaskName:   c.QueryParam("task_name"),
		SourceType: c.QueryParam("source_type"),
		Limit:      limit,
		Offset:     offset,
	}
	if f.TaskName != "" && f.Workspace == "" {
		return f, httpx.BadRequest("task_name requires workspace")
	}
	if f.Statuses, err = statusesParam(c, engine.ValidJobStatus); err != nil {
		return f, err
	}
	if f.SourceType != "" && !engine.ValidSourceType(f.SourceType) {
		return f, httpx.BadRequest("unknown source_type %q", f.SourceType)
	}
	switch v := c.QueryParam("queued"); v {
	case "", "false":
	case "true":
		f.Queued = true
		if c.QueryParam("cursor") != "" {
			return f, httpx.BadRequest("queued=true lists the jobs in line, paged by offset: no cursor")
		}
	default:
		return f, httpx.BadRequest("queued: want true or false, got %q", v)
	}
	if v := c.QueryParam("cursor"); v != "" {
		cur, err := engine.ParseJobCursor(v)
		if err != nil {
			return f, httpx.BadRequest("malformed cursor %q", v)
		}
		f.Cursor = &cur
	}
	return f, nil
}

// statusesParam reads a comma-separated `status` query parameter.
func statusesParam(c echo.Context, valid func(string) bool) ([]string, error) {
	v := c.QueryParam("status")
	if v == "" {
		return nil, nil
	}
	var out []string
	for _, st := range strings.Split(v, ",") {
		st = strings.TrimSpace(st)
		if !valid(st) {
			return nil, httpx.BadRequest("unknown status %q", st)
		}
		out = append(out, st)
	}
	return out, nil
}

// getJob shows a job with its secret values masked as in its log (the
// interface: secret inputs are masked in the UI, which shows this). It is
// streamed step by step (writeJobDetail); a big job's detail leaves its
// for_each instances to GET /api/jobs/{id}/steps.
func (s *server) getJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	job, err := s.cfg.Engine.JobRecord(ctx, id)
	if err != nil {
		return err
	}
	perm := s.jobPermission(c, job)
	if err := allowJob(perm, accounts.View, job); err != nil {
		return err
	}
	summary, err := s.cfg.Engine.StepSummary(ctx, id)
	if err != nil {
		return err
	}
	total := 0
	for _, n := range summary {
		total += n
	}
	// A big job's detail reads its flow steps only: the store passes over
	// the instances' records without decoding them.
	q := engine.StepQuery{After: -1, Limit: total + detailStepCap, FlowOnly: total > detailStepCap}
	steps, err := s.cfg.Engine.StepsPage(ctx, id, q)
	if err != nil {
		return err
	}
	secrets, err := s.secretsOf(job, steps)
	if err != nil {
		return err
	}
	omitted := 0
	if q.FlowOnly {
		omitted = max(1, total-len(steps))
	}
	return writeJobDetail(c, job, steps, summary, omitted, secrets, s.permissionField(perm))
}

// secretsOf is the job's secret values. A job whose workspace is no
// longer loaded has no definitions to say what is secret; it shows as
// stored (its log was masked when written).
func (s *server) secretsOf(job *engine.Job, steps []*engine.Step) ([]string, error) {
	secrets, err := s.cfg.Engine.SecretsOf(job, steps)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	return secrets, nil
}

func (s *server) cancelJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := s.checkJob(c, accounts.Run); err != nil {
		return err
	}
	if err := s.cfg.Engine.CancelJob(auth.Audited(c, audit.JobCancel, "job/"+id), id); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: engine.JobCancelled})
}

// rerunJob starts a new job of the job's task on the current revision
// (DESIGN.md "Operations"). Its source is the caller, as for an execute.
func (s *server) rerunJob(c echo.Context) error {
	id, err := jobIDParam(c)
	if err != nil {
		return err
	}
	if err := s.checkRerun(c); err != nil {
		return err
	}
	var req wire.RerunRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	sourceType, sourceID := jobSource(c)
	job, err := s.cfg.Engine.CreateJob(auth.Audited(c, audit.JobRerun, ""), engine.CreateJob{
		Input:      req.Input,
		Strict:     req.Input != nil, // given input is typed by a person, as on execute
		SourceType: sourceType,
		SourceID:   sourceID,
		Rerun:      &engine.Rerun{JobID: id, FromFailed: req.FromFailed},
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.JobCreated{JobID: job.ID})
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
	var req wire.ApproveRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if req.Approved == nil {
		return echo.NewHTTPError(http.StatusBadRequest, `"approved" (true or false) is required`)
	}
	err = s.cfg.Engine.Approve(auth.Audited(c, "", ""), id, c.Param("step"), engine.Approval{
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
	return c.JSON(http.StatusOK, wire.StatusAnswer{Status: status})
}
