package api

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/dispatch"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/workerproto"
)

// stepTokenPrefix marks a step-bound workspace token.
const stepTokenPrefix = "apst_"

// DefaultStepTokenTTL is how long a step-bound workspace token lives; it
// stops working sooner when its step ends.
const DefaultStepTokenTTL = 15 * time.Minute

// StepTokens mints and checks step-bound workspace tokens: what a pod's
// init container downloads its step's workspace revision with, so the
// worker token never enters a pod. A token names the job, step, holding
// worker, workspace and revision, is signed with a key the server draws at
// start (tokens do not outlive the process), and is honoured only until it
// expires and only while its worker holds the step running.
type StepTokens struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewStepTokens returns a minter with a fresh random key; ttl <= 0 is
// DefaultStepTokenTTL, now nil the real clock.
func NewStepTokens(ttl time.Duration, now func() time.Time) *StepTokens {
	if ttl <= 0 {
		ttl = DefaultStepTokenTTL
	}
	if now == nil {
		now = time.Now
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &StepTokens{key: key, ttl: ttl, now: now}
}

// stepClaims is what a step token says.
type stepClaims struct {
	Job       string `json:"j"`
	Step      string `json:"s"`
	Worker    string `json:"w"`
	Workspace string `json:"ws"`
	Revision  string `json:"r"`
	Expires   int64  `json:"e"`
}

// Mint returns a token for a step workerID holds running, with its
// expiry; the engine's refusal (not found, conflict) when it does not.
func (t *StepTokens) Mint(ctx context.Context, eng Orchestrator, workerID, jobID, step string) (string, time.Time, error) {
	if err := eng.CheckHolder(ctx, workerID, jobID, step); err != nil {
		return "", time.Time{}, err
	}
	job, err := eng.JobRecord(ctx, jobID) // not every step of a big job
	if err != nil {
		return "", time.Time{}, err
	}
	exp := t.now().Add(t.ttl).UTC().Truncate(time.Second)
	body, err := json.Marshal(stepClaims{Job: jobID, Step: step, Worker: workerID, Workspace: job.Workspace, Revision: job.Revision, Expires: exp.Unix()})
	if err != nil {
		return "", time.Time{}, err
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	return stepTokenPrefix + payload + "." + t.sign(payload), exp, nil
}

// MintFor is Mint over eng, as the worker service takes it.
func (t *StepTokens) MintFor(eng Orchestrator) dispatch.MintFunc {
	return func(ctx context.Context, workerID, jobID, step string) (string, time.Time, error) {
		return t.Mint(ctx, eng, workerID, jobID, step)
	}
}

func (t *StepTokens) sign(payload string) string {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errBadStepToken = errors.New("invalid workspace token")

// parse checks a token's signature and expiry.
func (t *StepTokens) parse(tok string) (*stepClaims, error) {
	rest, ok := strings.CutPrefix(tok, stepTokenPrefix)
	if !ok {
		return nil, errBadStepToken
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(t.sign(payload))) {
		return nil, errBadStepToken
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errBadStepToken
	}
	var c stepClaims
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errBadStepToken
	}
	if t.now().Unix() >= c.Expires {
		return nil, errors.New("workspace token expired")
	}
	return &c, nil
}

// isStepToken tells a step token from the worker token.
func isStepToken(tok string) bool { return strings.HasPrefix(tok, stepTokenPrefix) }

// mintStepToken is POST /worker/jobs/{id}/steps/{step}/workspace-token:
// a worker asks for a token bound to a step it holds.
func (s *server) mintStepToken(c echo.Context) error {
	jobID, err := jobIDParam(c)
	if err != nil {
		return err
	}
	var req workerproto.WorkerRef
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	ans, err := s.workers.StepToken(c.Request().Context(), remoteWorker(c), jobID, c.Param("step"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ans)
}

// requireTarballToken guards the workspace download: the worker token, or
// a step token for that workspace's revision while its step runs.
func (s *server) requireTarballToken(next echo.HandlerFunc) echo.HandlerFunc {
	workerOnly := s.requireWorkerToken(next)
	return func(c echo.Context) error {
		tok := httpx.BearerToken(c.Request())
		if !isStepToken(tok) {
			return workerOnly(c)
		}
		claims, err := s.stepTokens.parse(tok)
		if err != nil {
			return echo.NewHTTPError(http.StatusUnauthorized, err.Error())
		}
		if c.Param("file") != claims.Workspace+tarballSuffix || c.QueryParam("revision") != claims.Revision {
			return echo.NewHTTPError(http.StatusForbidden, "this workspace token is for revision "+claims.Revision+" of workspace "+claims.Workspace+" only")
		}
		if err := s.cfg.Engine.CheckHolder(c.Request().Context(), claims.Worker, claims.Job, claims.Step); err != nil {
			return echo.NewHTTPError(http.StatusUnauthorized, "workspace token no longer valid: its step is not running")
		}
		return next(c)
	}
}
