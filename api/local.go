package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/workerproto"
)

// Local execution mode: `appliance run --local` registers as a worker,
// creates a job it holds whole (POST /worker/jobs), claims that job's
// steps only (the claim's job_id), reports them as any worker does, and
// ends with POST /worker/jobs/{id}/complete. The engine decides everything
// else, as for any job (engine/local.go); dispatch.Service checks the
// reports.

func (s *server) createLocalJob(c echo.Context) error {
	var req workerproto.LocalJob
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	created, err := s.workers.CreateLocalJob(c.Request().Context(), remoteWorker(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, created)
}

func (s *server) completeJob(c echo.Context) error {
	return jobReport(c, s.workers.CompleteJob)
}
