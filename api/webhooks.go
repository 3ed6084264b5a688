package api

import (
	"bytes"
	"context"
	"errors"
	"github.com/appliance-sh/appliance/audit"
	"maps"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// Limits of the webhook status endpoint's `timeout` query parameter.
const (
	defaultHookWait = 30 * time.Second
	maxHookWaitSecs = 300
)

var errHookSecret = echo.NewHTTPError(http.StatusUnauthorized, "missing or invalid webhook secret")

// webhookRoutes serves /hooks: outside /api, no user auth, each trigger's
// optional secret instead.
func (s *server) webhookRoutes(e *echo.Echo) {
	h := e.Group("/hooks")
	h.POST("/:name", s.callWebhook)
	h.GET("/:name", s.callWebhook)
	h.GET("/:name/jobs/:job_id", s.webhookJob)
}

// hook is a webhook trigger found by its URL name.
type hook struct {
	ws      string
	trigger *workflow.Trigger
}

// findHook returns the enabled webhook trigger named name in the first
// workspace (by name) whose current revision has one; within a workspace,
// triggers are matched in declaration order (files by path, then as
// written).
func (s *server) findHook(name string) (hook, error) {
	for _, st := range s.cfg.Workspaces.List() {
		if st.Workspace == nil {
			continue
		}
		for _, k := range st.Workspace.TriggerNames() {
			t := st.Workspace.Triggers[k]
			if t != nil && t.Type == workflow.TriggerWebhook && t.Enabled && t.WebhookName == name {
				return hook{ws: st.Name, trigger: t}, nil
			}
		}
	}
	return hook{}, httpx.NotFound("webhook %q", name)
}

// checkSecret accepts a request for a trigger without secret, or one that
// carries the secret as ?secret= or as a bearer token. Digests are
// compared, in constant time, so not even the secret's length leaks.
func checkSecret(c echo.Context, t *workflow.Trigger) error {
	if t.Secret == "" {
		return nil
	}
	if q := c.QueryParams(); q.Has("secret") && sameSecret(q.Get("secret"), t.Secret) {
		return nil
	}
	if tok := httpx.BearerToken(c.Request()); tok != "" && sameSecret(tok, t.Secret) {
		return nil
	}
	return errHookSecret
}

// callWebhook runs the trigger's task with the request as its input. In
// sync mode it waits up to the trigger's timeout_secs for the job to end.
func (s *server) callWebhook(c echo.Context) error {
	h, err := s.findHook(c.Param("name"))
	if err != nil {
		return err
	}
	if err := checkSecret(c, h.trigger); err != nil {
		return err
	}
	input, err := hookInput(c, h.trigger)
	if err != nil {
		return err
	}
	name := h.trigger.WebhookName
	// The webhook is the actor (its secret, never recorded, proved it).
	ctx := audit.WithEntry(c.Request().Context(), audit.Entry{
		Actor: audit.Actor{ID: h.ws + "/" + name}, Source: audit.SourceWebhook, ClientAddress: c.RealIP(),
	})
	job, err := s.cfg.Engine.CreateJob(ctx, engine.CreateJob{
		Workspace:  h.ws,
		Task:       h.trigger.Task,
		Input:      input,
		SourceType: engine.SourceWebhook,
		SourceID:   &name,
	})
	if err != nil {
		return err
	}
	accepted := wire.HookAccepted{JobID: job.ID, Trigger: name, Task: job.TaskName}
	if h.trigger.Mode != "sync" {
		return c.JSON(http.StatusOK, accepted)
	}
	timeout := time.Duration(h.trigger.TimeoutSecs) * time.Second
	if timeout <= 0 {
		timeout = defaultHookWait
	}
	job, steps, ended, err := s.waitJob(ctx, job.ID, timeout)
	if err != nil {
		return err
	}
	if !ended {
		return c.JSON(http.StatusAccepted, map[string]string{
			"job_id": job.ID, "trigger": name, "task": job.TaskName, "status": job.Status,
		})
	}
	output, err := s.completedOutput(job, steps)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.HookResult{HookAccepted: accepted, Status: job.Status, Output: output})
}

// webhookJob reports a job this webhook created, optionally waiting for
// it to end: 200 when it is there (or ended in time), 202 when the wait
// timed out.
func (s *server) webhookJob(c echo.Context) error {
	id := c.Param("job_id")
	if !httpx.IsUUID(id) {
		return httpx.BadRequest("invalid job id %q: want a UUID", id)
	}
	h, err := s.findHook(c.Param("name"))
	if err != nil {
		return err
	}
	if err := checkSecret(c, h.trigger); err != nil {
		return err
	}
	wait, timeout, err := hookWaitParams(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	name := h.trigger.WebhookName
	job, steps, err := s.cfg.Engine.Job(ctx, id)
	if errors.Is(err, engine.ErrNotFound) || (err == nil && !fromHook(job, name)) {
		return httpx.NotFound("job %s of webhook %q", id, name)
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if wait && !job.Terminal() {
		var ended bool
		if job, steps, ended, err = s.waitJob(ctx, id, timeout); err != nil {
			return err
		}
		if !ended {
			status = http.StatusAccepted
		}
	}
	output, err := s.completedOutput(job, steps)
	if err != nil {
		return err
	}
	return c.JSON(status, wire.HookJob{
		HookResult: wire.HookResult{
			HookAccepted: wire.HookAccepted{JobID: job.ID, Trigger: name, Task: job.TaskName},
			Status:       job.Status,
			Output:       output,
		},
		CreatedAt:   job.CreatedAt.UTC(),
		CompletedAt: httpx.UTCPtr(job.CompletedAt),
	})
}

func fromHook(j *engine.Job, name string) bool {
	return j.SourceType == engine.SourceWebhook && j.SourceID != nil && *j.SourceID == name
}

// completedOutput is a job's output when it completed, else nil: a failed
// or cancelled job's partial outputs are not its result. It is shown as
// the steps wrote it, but for an approval's, whose approver input is
// masked as in the job detail.
func (s *server) completedOutput(j *engine.Job, steps []*engine.Step) (map[string]any, error) {
	if j.Status != engine.JobCompleted {
		return nil, nil
	}
	var approvals []string
	for _, st := range steps {
		if _, sink := j.Output[st.Name]; sink && st.ActionType == workflow.TypeApproval {
			approvals = append(approvals, st.Name)
		}
	}
	if len(approvals) == 0 {
		return j.Output, nil
	}
	secrets, err := s.cfg.Engine.SecretsOf(j, steps)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return nil, err
	}
	out := maps.Clone(j.Output)
	for _, name := range approvals {
		out[name] = maskedApproval(out[name], secrets)
	}
	return out, nil
}

// waitJob waits up to timeout for a job to end and returns it and its
// steps as last committed, and whether it is terminal.
func (s *server) waitJob(ctx context.Context, id string, timeout time.Duration) (*engine.Job, []*engine.Step, bool, error) {
	done, err := s.cfg.Engine.JobDone(ctx, id)
	if err != nil {
		return nil, nil, false, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	case <-ctx.Done():
		return nil, nil, false, ctx.Err()
	}
	job, steps, err := s.cfg.Engine.Job(ctx, id)
	if err != nil {
		return nil, nil, false, err
	}
	return job, steps, job.Terminal(), nil
}

// hookWaitParams reads `wait` (a boolean, default false) and `timeout`
// (whole seconds, 0 to 300, default 30).
func hookWaitParams(c echo.Context) (bool, time.Duration, error) {
	wait := false
	if v := c.QueryParam("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, 0, httpx.BadRequest("wait must be true or false, got %q", v)
		}
		wait = b
	}
	timeout := defaultHookWait
	if v := c.QueryParam("timeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxHookWaitSecs {
			return false, 0, httpx.BadRequest("timeout must be a whole number of seconds from 0 to %d, got %q", maxHookWaitSecs, v)
		}
		timeout = time.Duration(n) * time.Second
	}
	return wait, timeout, nil
}

// hookInput builds a webhook job's input from the request: body, headers,
// method and query, then the trigger's input defaults beside them.
//
// Header names are lowercase; a header or query parameter sent once is a
// string, one sent several times an array of its values in order. The
// credential is left out: the `secret` query parameter, and, for a
// trigger with a secret, the Authorization header.
func hookInput(c echo.Context, t *workflow.Trigger) (map[string]any, error) {
	r := c.Request()
	body, err := hookBody(r)
	if err != nil {
		return nil, err
	}
	headers := map[string]any{}
	for k, vs := range r.Header {
		k = strings.ToLower(k)
		if t.Secret != "" && k == "authorization" {
			continue
		}
		headers[k] = oneOrMany(vs)
	}
	if r.Host != "" {
		headers["host"] = r.Host // net/http moves it out of Header
	}
	query := map[string]any{}
	for k, vs := range r.URL.Query() {
		if k != "secret" {
			query[k] = oneOrMany(vs)
		}
	}
	// The request fills these keys; the trigger's own input defaults never
	// overwrite them.
	input := map[string]any{"body": body, "headers": headers, "method": r.Method, "query": query}
	for k, v := range t.Input {
		if _, taken := input[k]; !taken {
			input[k] = v
		}
	}
	return input, nil
}

// hookBody is the request body: null for GET, parsed JSON when the
// Content-Type is application/json (an empty body is null), else the raw
// text.
func hookBody(r *http.Request) (any, error) {
	if r.Method == http.MethodGet {
		return nil, nil
	}
	raw, err := httpx.ReadBody(r)
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return string(raw), nil
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var v any
	if err := httpx.UnmarshalJSON(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

func oneOrMany(vs []string) any {
	if len(vs) == 1 {
		return vs[0]
	}
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}
