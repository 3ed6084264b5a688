package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// detailStepCap is the most step records a job detail lists. A job with
// more (a big for_each) lists its flow steps only, each for_each parent
// with its aggregated output; `steps_omitted` counts the instances left
// out, which GET /api/jobs/{id}/steps pages. A job within the cap shows
// every step, as the interface says.
const detailStepCap = 1000

// writeJobDetail streams the job detail: the head, then one step view at
// a time into a buffered writer, with no slice of views in between.
// omitted is the count of for_each instances steps leaves out (0: steps is
// every step record).
func writeJobDetail(c echo.Context, j *engine.Job, steps []*engine.Step, summary map[string]int, omitted int, secrets []string, permission string) error {
	head := wire.JobHead{Job: jobOf(j), Input: object(j.Input), Output: j.Output, StepsSummary: summary, StepsOmitted: omitted, Permission: permission}
	if len(secrets) > 0 {
		head.Input = engine.MaskMap(head.Input, secrets)
		for _, s := range steps {
			// A sink approval step's output is the job's too.
			if out, ok := head.Output[s.Name]; ok && s.ActionType == workflow.TypeApproval {
				head.Output = maps.Clone(head.Output)
				head.Output[s.Name] = maskedApproval(out, secrets)
			}
		}
	}
	b, err := json.Marshal(head)
	if err != nil {
		return err
	}
	r := c.Response()
	r.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	r.WriteHeader(http.StatusOK)
	w := bufio.NewWriterSize(r, 64<<10)
	w.Write(b[:len(b)-1]) // the head's closing brace comes after the steps
	w.WriteString(`,"steps":[`)
	// One step at a time through a reused buffer: the answer stays one
	// line, as an encoded value would be.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i, s := range steps {
		if i > 0 {
			w.WriteByte(',')
		}
		buf.Reset()
		if err := enc.Encode(maskedStep(stepOf(s), secrets)); err != nil {
			return err // the status is sent: the broken body tells the client
		}
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	w.WriteString("]}\n")
	return w.Flush()
}

// listSteps pages a job's steps: GET /api/jobs/{id}/steps with `status`
// (comma-separated), `cursor` and `limit` (DESIGN.md "Lists: filters and
// cursors"). A cursor is the position (the step's sequence number) of the
// last step of a page: instances a for_each adds meanwhile keep their place.
func (s *server) listSteps(c echo.Context) error {
	limit, _, err := httpx.Page(c)
	if err != nil {
		return err
	}
	statuses, err := statusesParam(c, validStepStatus)
	if err != nil {
		return err
	}
	after := -1
	if v := c.QueryParam("cursor"); v != "" {
		if after, err = strconv.Atoi(v); err != nil || after < 0 {
			return httpx.BadRequest("malformed cursor %q", v)
		}
	}
	ctx := c.Request().Context()
	job, err := s.allowedJobRecord(c, accounts.View)
	if err != nil {
		return err
	}
	id := job.ID
	summary, err := s.cfg.Engine.StepSummary(ctx, id)
	if err != nil {
		return err
	}
	steps, err := s.cfg.Engine.StepsPage(ctx, id, engine.StepQuery{Statuses: statuses, After: after, Limit: limit + 1})
	if err != nil {
		return err
	}
	secrets, err := s.secretsOf(job, steps)
	if err != nil {
		return err
	}
	out := wire.StepList{Items: make([]wire.Step, 0, min(len(steps), limit))}
	for st, n := range summary {
		if len(statuses) == 0 || slices.Contains(statuses, st) {
			out.Total += n
		}
	}
	if len(steps) > limit {
		steps = steps[:limit]
		next := strconv.Itoa(steps[limit-1].Seq)
		out.NextCursor = &next
	}
	for _, st := range steps {
		out.Items = append(out.Items, maskedStep(stepOf(st), secrets))
	}
	return c.JSON(http.StatusOK, out)
}

func validStepStatus(s string) bool {
	switch s {
	case engine.StepPending, engine.StepReady, engine.StepRunning, engine.StepWaiting,
		engine.StepCompleted, engine.StepFailed, engine.StepSkipped, engine.StepCancelled:
		return true
	}
	return false
}
