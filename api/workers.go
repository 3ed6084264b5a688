package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

func (s *server) listWorkers(c echo.Context) error {
	limit, offset, err := page(c)
	if err != nil {
		return err
	}
	workers, total, err := s.cfg.Engine.Workers(c.Request().Context(), limit, offset)
	if err != nil {
		return err
	}
	out := list[workerItem]{Items: make([]workerItem, len(workers)), Total: total}
	for i, w := range workers {
		out.Items[i] = workerItemOf(w)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *server) getWorker(c echo.Context) error {
	id := c.Param("id")
	if !isUUID(id) {
		return notFound("worker %q", id)
	}
	w, steps, total, err := s.cfg.Engine.Worker(c.Request().Context(), id)
	if err != nil {
		return err
	}
	d := workerDetail{workerItem: workerItemOf(w), Steps: workerSteps{Items: make([]workerStepView, len(steps)), Total: total}}
	for i, st := range steps {
		d.Steps.Items[i] = workerStepOf(st)
	}
	return c.JSON(http.StatusOK, d)
}
