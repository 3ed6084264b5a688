package api

import (
	"encoding/json"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/audit"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/cron"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// nextRunsShown is how many upcoming fire times a scheduler trigger lists.
const nextRunsShown = 5

func (s *server) listWorkspaces(c echo.Context) error {
	statuses := s.cfg.Workspaces.List()
	items := make([]wire.Workspace, 0, len(statuses))
	_, restricted := s.restricted(c)
	for _, st := range statuses {
		item := wire.Workspace{Name: st.Name, Errors: s.loadErrors(c, st.Name, st.Errors)}
		if ws := st.Workspace; ws != nil {
			item.TasksCount, item.ActionsCount, item.TriggersCount = s.visibleTaskCount(c, ws), len(ws.Actions), s.visibleTriggerCount(c, ws)
			item.Revision = ws.Revision
		}
		if restricted && item.TasksCount == 0 {
			continue // a workspace with no task the caller may see is absent
		}
		items = append(items, item)
	}
	return c.JSON(http.StatusOK, items)
}

// loadErrors is what the caller may read of a workspace's load problems:
// all of them, as written, for an admin or without an ACL. A user under
// the ACL reads only the problems of files whose tasks they may all view,
// located (file:line:col and key path) but with every quoted text left
// out: a template's source, and whatever value a message quotes, may be a
// literal secret or one of a hidden task's.
func (s *server) loadErrors(c echo.Context, workspace string, es workflow.Errors) []string {
	u, restricted := s.restricted(c)
	var out []string
	for _, e := range es {
		if !restricted {
			out = append(out, e.Error())
			continue
		}
		if len(e.Tasks) == 0 || slices.ContainsFunc(e.Tasks, func(path string) bool {
			return path == "" || s.cfg.ACL.Permission(u, workspace, path) < accounts.View
		}) {
			continue
		}
		r := *e
		r.Msg = quotedText.ReplaceAllString(r.Msg, `"…"`)
		if i := strings.Index(r.Msg, "template "); i >= 0 {
			r.Msg = r.Msg[:i] + "template error (an admin can read it)"
		}
		out = append(out, r.Error())
	}
	return out
}

// quotedText is what a load problem's message quotes: names, values, a
// template's source, in double or single quotes.
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)

// workspace returns the revision in use of the `ws` path parameter. A
// workspace that is configured but never loaded cleanly is known and
// empty (nil, nil); an unconfigured name is a 404.
func (s *server) workspace(c echo.Context) (*workflow.Workspace, error) {
	name := c.Param("ws")
	ws, ok := s.cfg.Workspaces.Current(name)
	if _, restricted := s.restricted(c); restricted {
		// Under the ACL a workspace with no task the caller may see does
		// not exist for them.
		if !ok || s.visibleTaskCount(c, ws) == 0 {
			return nil, httpx.NotFound("workspace %q", name)
		}
		return ws, nil
	}
	if ok {
		return ws, nil
	}
	for _, st := range s.cfg.Workspaces.List() {
		if st.Name == name {
			return nil, nil
		}
	}
	return nil, httpx.NotFound("workspace %q", name)
}

// task returns the `name` task of the `ws` workspace if the caller has
// need on it (see allowTask).
func (s *server) task(c echo.Context, need accounts.Action) (*workflow.Workspace, *workflow.Task, error) {
	ws, err := s.workspace(c)
	if err != nil {
		return nil, nil, err
	}
	name := c.Param("name")
	if ws == nil || ws.Tasks[name] == nil {
		return nil, nil, httpx.NotFound("task %q in workspace %q", name, c.Param("ws"))
	}
	if err := allowTask(s.permission(c, ws, ws.Name, name), need, ws.Name, name); err != nil {
		return nil, nil, err
	}
	return ws, ws.Tasks[name], nil
}

func (s *server) listTasks(c echo.Context) error {
	ws, err := s.workspace(c)
	if err != nil {
		return err
	}
	items := []wire.Task{}
	if ws != nil {
		for name, t := range ws.Tasks {
			perm := s.permission(c, ws, ws.Name, name)
			if perm == accounts.Deny {
				continue
			}
			items = append(items, wire.Task{
				Name:        name,
				Workspace:   ws.Name,
				Mode:        t.Mode,
				HasTriggers: len(s.triggersOf(c, ws, name, true)) > 0,
				Folder:      t.Folder,
				DisplayName: t.Name,
				Description: t.Description,
				Permission:  s.permissionField(perm),
			})
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return c.JSON(http.StatusOK, items)
}

func (s *server) getTask(c echo.Context) error {
	ws, t, err := s.task(c, accounts.View)
	if err != nil {
		return err
	}
	input := t.Input
	if input == nil {
		input = &workflow.Inputs{}
	}
	flow, err := t.FlowJSON()
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.TaskDetail{
		Name:        c.Param("name"),
		DisplayName: t.Name,
		Description: t.Description,
		Folder:      t.Folder,
		Mode:        t.Mode,
		Input:       input,
		Flow:        flow,
		Triggers:    s.triggersOf(c, ws, c.Param("name"), false),
		Permission:  s.permissionField(s.permission(c, ws, ws.Name, c.Param("name"))),
	})
}

func (s *server) executeTask(c echo.Context) error {
	ws, _, err := s.task(c, accounts.Run)
	if err != nil {
		return err
	}
	var req wire.ExecuteRequest
	if err := httpx.DecodeJSON(c, &req); err != nil {
		return err
	}
	sourceType, sourceID := jobSource(c)
	job, err := s.cfg.Engine.CreateJob(auth.Audited(c, audit.JobExecute, ""), engine.CreateJob{
		Workspace:  ws.Name,
		Task:       c.Param("name"),
		Input:      object(req.Input),
		SourceType: sourceType,
		SourceID:   sourceID,
		Strict:     true, // a typo in a key is a 400, not an ignored value
		// A retried submission (a broken forward, a failover) answers the
		// job the first one made.
		IdempotencyKey: c.Request().Header.Get("Idempotency-Key"),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.JobCreated{JobID: job.ID})
}

func (s *server) listTriggers(c echo.Context) error {
	ws, err := s.workspace(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, s.triggersOf(c, ws, "", false))
}

// triggersOf lists a workspace's triggers by name: all of them, or those
// that start the task (as their task or, for event sources, as the target
// of their events), optionally only the enabled ones; under the ACL only
// those the caller may see (triggerVisible).
func (s *server) triggersOf(c echo.Context, ws *workflow.Workspace, task string, enabledOnly bool) []wire.Trigger {
	out := []wire.Trigger{}
	if ws == nil {
		return out
	}
	now := s.cfg.Now()
	for name, tr := range ws.Triggers {
		if task != "" && tr.Task != task && tr.TargetTask != task {
			continue
		}
		if enabledOnly && !tr.Enabled {
			continue
		}
		if !s.triggerVisible(c, ws, tr) {
			continue
		}
		out = append(out, s.triggerViewOf(ws.Name, name, tr, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *server) triggerViewOf(workspace, name string, tr *workflow.Trigger, now time.Time) wire.Trigger {
	v := wire.Trigger{
		Name: name, Type: tr.Type, Task: tr.Task, Enabled: tr.Enabled, Input: object(tr.Input),
		Cron: tr.Cron, Timezone: tr.Timezone, Concurrency: tr.Concurrency,
		WebhookName: tr.WebhookName, Mode: tr.Mode, TimeoutSecs: tr.TimeoutSecs, HasSecret: tr.Secret != "",
		TargetTask: tr.TargetTask, RestartPolicy: tr.RestartPolicy, MaxInFlight: tr.MaxInFlight, BackoffSecs: tr.BackoffSecs,
	}
	if tr.Type == workflow.TriggerEventSource {
		s.eventSourceView(workspace, name, &v)
		return v
	}
	if tr.Type != workflow.TriggerScheduler {
		return v
	}
	// A disabled trigger has no upcoming runs; an empty list (not an
	// absent field) says so.
	v.NextRuns = []time.Time{}
	if !tr.Enabled {
		return v
	}
	runs, err := cron.NextRuns(tr.Cron, tr.Timezone, now, nextRunsShown)
	if err != nil {
		// Loading validates cron expressions, so this is a bug worth a log
		// line, not a failed listing.
		s.log.Warn("trigger schedule", "workspace", workspace, "trigger", name, "err", err)
		return v
	}
	v.NextRuns = runs
	return v
}

func (s *server) visibleTriggerCount(c echo.Context, ws *workflow.Workspace) int {
	n := 0
	for _, tr := range ws.Triggers {
		if s.triggerVisible(c, ws, tr) {
			n++
		}
	}
	return n
}

// eventSourceView adds an event source's consumer: its job, state and
// restarts (stopped, with no job, when the supervisor does not run it).
func (s *server) eventSourceView(workspace, name string, v *wire.Trigger) {
	st := engine.ConsumerStatus{State: engine.ConsumerStopped}
	if s.cfg.EventSources != nil {
		if got, ok := s.cfg.EventSources.Status(workspace, name); ok {
			st = got
		} else if v.Enabled && s.cfg.EventSources.Running() {
			st.State = engine.ConsumerStarting
		}
	}
	v.ConsumerJobID = json.RawMessage("null")
	if st.ConsumerJobID != "" {
		v.ConsumerJobID, _ = json.Marshal(st.ConsumerJobID)
	}
	v.State = st.State
	v.Restarts = &st.Restarts
}
