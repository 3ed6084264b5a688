package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

func (s *server) listWorkers(c echo.Context) error {
	limit, offset, err := httpx.Page(c)
	if err != nil {
		return err
	}
	workers, total, err := s.cfg.Engine.Workers(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	out := wire.List[wire.Worker]{Items: make([]wire.Worker, len(workers)), Total: total}
	for i, w := range workers {
		out.Items[i] = workerOf(w)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *server) getWorker(c echo.Context) error {
	id := c.Param("id")
	if !httpx.IsUUID(id) {
		return httpx.NotFound("worker %q", id)
	}
	// Steps of tasks the caller may not see are absent, from the page and
	// from its total.
	w, steps, total, err := s.cfg.Engine.WorkerFor(c.Request().Context(), id, s.jobVisibility(c))
	if err != nil {
		return err
	}
	d := wire.WorkerDetail{Worker: workerOf(w), Steps: wire.List[wire.WorkerStep]{Items: make([]wire.WorkerStep, len(steps)), Total: total}}
	secrets := map[string][]string{} // by job: a page often holds many steps of one job
	for i, st := range steps {
		values, ok := secrets[st.JobID]
		if !ok {
			if values, err = s.jobSecrets(c.Request().Context(), st.JobID); err != nil {
				return err
			}
			secrets[st.JobID] = values
		}
		d.Steps.Items[i] = maskedWorkerStep(workerStepOf(st), values)
	}
	return c.JSON(http.StatusOK, d)
}

// jobSecrets is what an answer about the job masks (as its log does). A
// job that is gone, or whose workspace is no longer loaded, has no
// definitions to say what is secret: it shows as stored (its messages
// were masked when recorded).
func (s *server) jobSecrets(ctx context.Context, jobID string) ([]string, error) {
	values, err := s.cfg.Engine.SecretValues(ctx, jobID)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	return values, err
}
