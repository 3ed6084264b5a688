package api

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/engine"
)

// Local execution mode: `appliance run --local` registers as a worker,
// creates a job it holds whole (POST /worker/jobs), claims that job's
// steps only (the claim's job_id), reports them as any worker does, and
// ends with POST /worker/jobs/{id}/complete. The engine decides everything
// else, as for any job (engine/local.go).

type createLocalJobRequest struct {
	WorkerID  string         `json:"worker_id"`
	Workspace string         `json:"workspace"`
	Task      string         `json:"task"`
	Input     map[string]any `json:"input"`
}

type createLocalJobResponse struct {
	JobID    string `json:"job_id"`
	Revision string `json:"revision"`
}

func (s *server) createLocalJob(c echo.Context) error {
	var req createLocalJobRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case req.WorkerID == "":
		return badRequest("worker_id is required")
	case strings.TrimSpace(req.Workspace) == "":
		return badRequest("workspace is required")
	case strings.TrimSpace(req.Task) == "":
		return badRequest("task is required")
	}
	job, err := s.cfg.Engine.CreateLocalJob(c.Request().Context(), req.WorkerID, engine.CreateJob{
		Workspace: req.Workspace,
		Task:      req.Task,
		Input:     object(req.Input),
		Strict:    true, // typed by a person on the command line
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, createLocalJobResponse{JobID: job.ID, Revision: job.Revision})
}

// completeJobRequest is the body of POST /worker/jobs/{id}/complete:
// worker_id (ours, required) names the holder; the interface's output is
// accepted, but the job's output is its sink steps' outputs, which the
// worker reported one by one, as for every job.
type completeJobRequest struct {
	WorkerID string         `json:"worker_id"`
	Output   map[string]any `json:"output"`
}

type completeJobResponse struct {
	Status    string `json:"status"`
	JobStatus string `json:"job_status"`
}

func (s *server) completeJob(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req completeJobRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.WorkerID == "" {
		return badRequest("worker_id is required: only the worker holding a local job completes it")
	}
	job, err := s.cfg.Engine.CompleteJob(c.Request().Context(), req.WorkerID, jobID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, completeJobResponse{Status: "ok", JobStatus: job.Status})
}
