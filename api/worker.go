package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/dispatch"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/workerproto"
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
		token := httpx.BearerToken(c.Request())
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

// The handlers below decode a report, hand it to the worker service
// (which both transports share: it validates, checks the caller is the
// worker it names and maps refusals to the protocol's kinds) and write
// its answer; handleError maps the refusals to statuses.

// remoteWorker is the caller of a worker endpoint: a remote worker, with
// the secret it sent, if any.
func remoteWorker(c echo.Context) dispatch.Caller {
	return dispatch.Remote(c.Request().Header.Get(workerproto.SecretHeader))
}

func (s *server) registerWorker(c echo.Context) error {
	var req workerproto.Register
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	ans, err := s.workers.Register(c.Request().Context(), remoteWorker(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ans)
}

func (s *server) heartbeat(c echo.Context) error {
	var req workerproto.Heartbeat
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.workers.Heartbeat(c.Request().Context(), remoteWorker(c), req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workerproto.OK)
}

// noWork is the claim answer when nothing is ready, as the interface fixes it.
var noWork = map[string]any{"job_id": nil, "step_name": nil, "action_spec": nil}

func (s *server) claim(c echo.Context) error {
	wait, err := waitParam(c, defaultClaimWait, s.cfg.ClaimWaitMax)
	if err != nil {
		return err
	}
	var req workerproto.Claim
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	// The request context ends when the worker hangs up; the engine then
	// stops waiting, and hands back a step it could not deliver.
	a, err := s.workers.Claim(c.Request().Context(), remoteWorker(c), req, wait)
	if err != nil {
		return err
	}
	if a == nil {
		return c.JSON(http.StatusOK, noWork)
	}
	return c.JSON(http.StatusOK, a)
}

// claimSteps is POST /worker/claims (ours): up to max steps at once,
// answered once durable.
func (s *server) claimSteps(c echo.Context) error {
	arrived := time.Now()
	wait, err := waitParam(c, defaultClaimWait, s.cfg.ClaimWaitMax)
	if err != nil {
		return err
	}
	var req workerproto.Claims
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	ans, results, err := s.workers.ClaimSteps(c.Request().Context(), remoteWorker(c), req, wait)
	if err != nil {
		return err
	}
	for i, err := range results {
		ans.Results = append(ans.Results, s.reportAnswer(req.Results[i], err))
	}
	if s.cfg.OnClaimed != nil && len(ans.Assignments) > 0 {
		s.cfg.OnClaimed(time.Since(arrived))
	}
	return c.JSON(http.StatusOK, ans)
}

func (s *server) startStep(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req workerproto.WorkerRef
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.workers.Start(c.Request().Context(), remoteWorker(c), jobID, c.Param("step"), req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workerproto.OK)
}

func (s *server) completeStep(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req workerproto.Result
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if err := s.workers.Complete(c.Request().Context(), remoteWorker(c), jobID, c.Param("step"), req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workerproto.OK)
}

// reports is POST /worker/reports (ours): several steps' results, each
// recorded as by its own complete (concurrently, so the engine commits
// them together) and answered on its own.
func (s *server) reports(c echo.Context) error {
	var req workerproto.Reports
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ctx, who := c.Request().Context(), remoteWorker(c)
	ans := workerproto.ReportAnswers{Results: make([]workerproto.ReportAnswer, len(req.Results))}
	var wg sync.WaitGroup
	for i, r := range req.Results {
		wg.Go(func() {
			ans.Results[i] = s.reportAnswer(r, s.workers.Complete(ctx, who, r.JobID, r.StepName, r.Result))
		})
	}
	wg.Wait()
	return c.JSON(http.StatusOK, ans)
}

// reportAnswer is the answer to one of several results a request carries:
// the status and error its own complete would have had.
func (s *server) reportAnswer(r workerproto.StepResult, err error) workerproto.ReportAnswer {
	if err == nil {
		return workerproto.ReportAnswer{Status: http.StatusOK}
	}
	status, msg := s.classify(err)
	if status >= http.StatusInternalServerError && status != http.StatusServiceUnavailable {
		s.log.Error("report failed", "job_id", r.JobID, "step", r.StepName, "err", err)
	}
	return workerproto.ReportAnswer{Status: status, Error: msg}
}

// A log push, the bulk of what remote workers send, is decoded by hand
// (DecodeJSON takes its fast path).
var _ httpx.FastDecoder = (*workerproto.LogPush)(nil)

func (s *server) pushLogs(c echo.Context) error {
	return jobReport(c, s.workers.PushLogs)
}

// jobReport answers a remote worker's report on the job in the path: its
// JSON body decoded, one call of the dispatch service, the call's answer.
func jobReport[Req, Ans any](c echo.Context, call func(context.Context, dispatch.Caller, string, Req) (Ans, error)) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req Req
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	ans, err := call(c.Request().Context(), remoteWorker(c), jobID, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ans)
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
	cancelled, err := s.workers.Cancelled(c.Request().Context(), jobID, wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, workerproto.Cancelled{Cancelled: cancelled})
}
