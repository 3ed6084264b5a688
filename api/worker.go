package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners"
)

// Long-poll bounds of the worker endpoints.
const (
	defaultClaimWait     = 20 * time.Second
	defaultCancelledWait = 30 * time.Second
	maxCancelledWait     = 60 * time.Second
)

// requireWorkerToken guards /worker with the shared token.
func (s *server) requireWorkerToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.cfg.WorkerToken == "" {
			return echo.NewHTTPError(http.StatusUnauthorized, "worker endpoints are disabled: the server has no worker_token")
		}
		token := bearerToken(c.Request())
		if token == "" {
			return echo.NewHTTPError(http.StatusUnauthorized, "missing worker token (Authorization: Bearer <worker_token>)")
		}
		if !sameSecret(token, s.cfg.WorkerToken) {
			return echo.NewHTTPError(http.StatusUnauthorized, "invalid worker token")
		}
		return next(c)
	}
}

// sameSecret compares a presented secret with the configured one. Both
// are hashed first so the comparison takes the same time whatever the
// length of the guess.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

type registerRequest struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
}

func (s *server) registerWorker(c echo.Context) error {
	var req registerRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Name) == "" {
		return badRequest("name is required")
	}
	if req.Tags == nil {
		req.Tags = []string{}
	}
	id, err := s.cfg.Engine.RegisterWorker(c.Request().Context(), req.Name, req.Tags, false)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"worker_id": id})
}

// workerRequest is the body of the endpoints that only name the worker.
type workerRequest struct {
	WorkerID string `json:"worker_id"`
}

// heartbeatRequest is the heartbeat body. running (ours, optional) lists
// the steps the worker runs, so a claim whose answer was lost is recovered.
type heartbeatRequest struct {
	WorkerID string            `json:"worker_id"`
	Running  []runners.StepRef `json:"running"`
}

func (s *server) heartbeat(c echo.Context) error {
	var req heartbeatRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.WorkerID == "" {
		return badRequest("worker_id is required")
	}
	var running []engine.StepRef
	if req.Running != nil {
		running = make([]engine.StepRef, len(req.Running))
		for i, r := range req.Running {
			running[i] = engine.StepRef{JobID: r.JobID, Step: r.Step}
		}
	}
	if err := s.cfg.Engine.Heartbeat(c.Request().Context(), req.WorkerID, running); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOK)
}

// claimRequest is the claim body. tags is accepted, as the interface sends
// it, and ignored: a worker claims with the tags it registered with, so a
// claim cannot reach steps meant for other workers.
type claimRequest struct {
	WorkerID string   `json:"worker_id"`
	Tags     []string `json:"tags"`
	// JobID (ours) claims a step of that local job, which the worker holds.
	JobID string `json:"job_id"`
}

// noWork is the claim answer when nothing is ready, as the interface fixes it.
var noWork = map[string]any{"job_id": nil, "step_name": nil, "action_spec": nil}

func (s *server) claim(c echo.Context) error {
	wait, err := waitParam(c, defaultClaimWait, s.cfg.ClaimWaitMax)
	if err != nil {
		return err
	}
	var req claimRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.WorkerID == "" {
		return badRequest("worker_id is required")
	}
	// The request context ends when the worker hangs up; the engine then
	// stops waiting, and hands back a step it could not deliver.
	var cl *engine.Claim
	if req.JobID != "" {
		cl, err = s.cfg.Engine.ClaimJob(c.Request().Context(), req.WorkerID, req.JobID, wait)
	} else {
		cl, err = s.cfg.Engine.Claim(c.Request().Context(), req.WorkerID, wait)
	}
	if err != nil {
		return err
	}
	if cl == nil {
		return c.JSON(http.StatusOK, noWork)
	}
	return c.JSON(http.StatusOK, AssignmentOf(cl))
}

func (s *server) startStep(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	// A missing worker_id is refused by the engine, which holds the rule
	// for both transports.
	var req workerRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.cfg.Engine.StartStep(c.Request().Context(), req.WorkerID, jobID, c.Param("step")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, statusOK)
}

func (s *server) completeStep(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req runners.Result
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	err = s.cfg.Engine.CompleteStep(c.Request().Context(), req.WorkerID, jobID, c.Param("step"), engine.StepResult{
		Output: req.Output, ExitCode: req.ExitCode, Error: req.Error,
	})
	if err != nil {
		return err
	}
	s.lineSeqs.forget(jobID, c.Param("step"))
	return c.JSON(http.StatusOK, statusOK)
}

// pushLogsRequest is the log push body; worker_id (ours) names the worker
// holding the step, as for start and complete.
type pushLogsRequest struct {
	WorkerID string            `json:"worker_id"`
	StepName string            `json:"step_name"`
	Run      string            `json:"run"` // ours: see runners.LogPush
	Lines    []runners.LogLine `json:"lines"`
}

type pushLogsResponse struct {
	Status    string `json:"status"`
	Cancelled bool   `json:"cancelled"`
}

func (s *server) pushLogs(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req pushLogsRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.StepName == "" {
		return badRequest("step_name is required")
	}
	for i, l := range req.Lines {
		if l.Stream != "stdout" && l.Stream != "stderr" {
			return badRequest("lines[%d].stream must be stdout or stderr, got %q", i, l.Stream)
		}
	}
	// Workers write only the lines of steps they hold (so never `_server`,
	// the orchestrator's voice); the check reads the engine's holder index
	// without a turn of its loop.
	if err := s.cfg.Engine.CheckHolder(c.Request().Context(), req.WorkerID, jobID, req.StepName); err != nil {
		return err
	}
	err = s.lineSeqs.appendNew(jobID, req.StepName, req.Run, req.Lines, func(lines []runners.LogLine) error {
		return s.cfg.Engine.AppendLog(jobID, logLinesAt(req.StepName, lines, s.cfg.Now()))
	})
	if err != nil {
		return err
	}
	cancelled, err := s.cfg.Engine.WaitCancelled(c.Request().Context(), jobID, 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pushLogsResponse{Status: "ok", Cancelled: cancelled})
}

func (s *server) waitCancelled(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	wait, err := waitParam(c, defaultCancelledWait, maxCancelledWait)
	if err != nil {
		return err
	}
	cancelled, err := s.cfg.Engine.WaitCancelled(c.Request().Context(), jobID, wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"cancelled": cancelled})
}
