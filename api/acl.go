package api

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// Access control (DESIGN.md "Authorization (ACL)"): with Config.ACL set
// and auth on, each task is deny, view or run for the caller. Denied tasks
// and their jobs do not exist for them (404, absent from lists and
// counts); viewed ones are read-only (403 on execute, cancel, approve and
// rerun). A job is judged by the access path stored on it at creation
// (engine.Job.AccessPath): a child job by its own task, a hook job by the
// job that fired it. Webhooks and triggers firing are outside: their
// secrets guard them.

// restricted reports whether the caller is subject to the ACL: it is on
// and the caller is no admin.
func (s *server) restricted(c echo.Context) (*accounts.User, bool) {
	if s.cfg.ACL == nil || s.auth == nil {
		return nil, false
	}
	p := auth.Caller(c)
	if p == nil || p.User.IsAdmin {
		return nil, false
	}
	return p.User, true
}

// jobSource attributes a job created through the API: to the calling user
// with auth on, to "api" without (DESIGN.md "source_type").
func jobSource(c echo.Context) (string, *string) {
	if p := auth.Caller(c); p != nil {
		email := p.User.Email
		return engine.SourceUser, &email
	}
	return engine.SourceAPI, nil
}

// actorName names who answered an approval: the user's email with auth on.
func actorName(c echo.Context) string {
	if p := auth.Caller(c); p != nil {
		return p.User.Email
	}
	return "anonymous"
}

// taskPath is the path ACL rules match a task of ws by (see
// workflow.TaskPath).
func taskPath(ws *workflow.Workspace, task string) string {
	var folder string
	if t := ws.Tasks[task]; t != nil {
		folder = t.Folder
	}
	return workflow.TaskPath(folder, task)
}

// permission is what the caller may do with a task of ws.
func (s *server) permission(c echo.Context, ws *workflow.Workspace, workspace, task string) accounts.Action {
	u, ok := s.restricted(c)
	if !ok {
		return accounts.Run
	}
	return s.cfg.ACL.Permission(u, workspace, taskPath(ws, task))
}

// permissionField is a permission as task and job answers report it:
// "view" or "run" when the ACL is on (the UI offers only what the caller
// may do), "" (the field is absent) when it is off.
func (s *server) permissionField(perm accounts.Action) string {
	if s.cfg.ACL == nil || s.auth == nil {
		return ""
	}
	return perm.String()
}

// jobPermission is what the caller may do with a job: judged by the
// access path stored on it when it was created, never by where its task
// is now (renamed, moved or gone), and for a hook job by the job that
// fired it.
func (s *server) jobPermission(c echo.Context, job *engine.Job) accounts.Action {
	u, ok := s.restricted(c)
	if !ok {
		return accounts.Run
	}
	return s.cfg.ACL.Permission(u, job.Workspace, job.AccessPath)
}

// jobVisibility is the job list filter of the caller, over the jobs'
// stored access paths: nil when every job is visible to them.
func (s *server) jobVisibility(c echo.Context) func(workspace, accessPath string) bool {
	u, ok := s.restricted(c)
	if !ok {
		return nil
	}
	acl := s.cfg.ACL
	return func(workspace, accessPath string) bool {
		return acl.Permission(u, workspace, accessPath) >= accounts.View
	}
}

// allowTask answers a denied task as unknown and a task the caller may
// only view, when need is Run, with 403.
func allowTask(perm, need accounts.Action, workspace, task string) error {
	if perm == accounts.Deny {
		return httpx.NotFound("task %q in workspace %q", task, workspace)
	}
	if perm < need {
		return forbidden("you may view task %q of workspace %q but not run, cancel, approve or rerun it (ask an admin for the run permission)", task, workspace)
	}
	return nil
}

// jobNotFound is the answer for a job the caller may not see, worded as
// for a job that does not exist.
func jobNotFound(id string) error {
	return fmt.Errorf("job %s: %w", id, engine.ErrNotFound)
}

// allowJob answers a job of a denied task as unknown and, when need is
// Run, a job the caller may only view with 403.
func allowJob(perm, need accounts.Action, job *engine.Job) error {
	switch {
	case perm == accounts.Deny:
		return jobNotFound(job.ID)
	case perm < need:
		return forbidden("you may view job %s of task %q but not cancel, approve or rerun it (ask an admin for the run permission)", job.ID, job.TaskName)
	}
	return nil
}

// checkJob is allowedJob for handlers that do not need the job: it costs
// a lookup only for callers subject to the ACL.
func (s *server) checkJob(c echo.Context, need accounts.Action) error {
	if _, ok := s.restricted(c); !ok {
		return nil
	}
	_, err := s.allowedJobRecord(c, need)
	return err
}

// checkRerun: a re-run is a new job of the task where it is now, so the
// caller needs run on the old job (its stored path) and on the task's
// current path, which a move may have hidden from them. A hook job, or a
// task that is gone, is the engine's to refuse.
func (s *server) checkRerun(c echo.Context) error {
	if _, ok := s.restricted(c); !ok {
		return nil
	}
	job, err := s.allowedJobRecord(c, accounts.Run)
	if err != nil || job.SourceType == engine.SourceHook {
		return err
	}
	ws, ok := s.cfg.Workspaces.Current(job.Workspace)
	if !ok || ws.Tasks[job.TaskName] == nil {
		return nil
	}
	return allowTask(s.permission(c, ws, job.Workspace, job.TaskName), accounts.Run, job.Workspace, job.TaskName)
}

// allowedJobRecord loads the record of the `id` path parameter's job if
// the caller has need on its task: 404 for a denied one (as for no job),
// 403 for one they may only view when need is Run. The record alone says
// the job exists, so a big job's steps stay unread.
func (s *server) allowedJobRecord(c echo.Context, need accounts.Action) (*engine.Job, error) {
	id, err := jobIDParam(c)
	if err != nil {
		return nil, err
	}
	job, err := s.cfg.Engine.JobRecord(c.Request().Context(), id)
	if err != nil {
		return nil, err
	}
	return job, allowJob(s.jobPermission(c, job), need, job)
}

// triggerVisible: a trigger is listed to those who may view every task it
// starts (its task and, for an event source, its target task).
func (s *server) triggerVisible(c echo.Context, ws *workflow.Workspace, tr *workflow.Trigger) bool {
	if _, ok := s.restricted(c); !ok {
		return true
	}
	if s.permission(c, ws, ws.Name, tr.Task) < accounts.View {
		return false
	}
	return tr.TargetTask == "" || s.permission(c, ws, ws.Name, tr.TargetTask) >= accounts.View
}

// visibleTasks counts the tasks of ws the caller may view.
func (s *server) visibleTaskCount(c echo.Context, ws *workflow.Workspace) int {
	if _, ok := s.restricted(c); !ok {
		return len(ws.Tasks)
	}
	n := 0
	for name := range ws.Tasks {
		if s.permission(c, ws, ws.Name, name) >= accounts.View {
			n++
		}
	}
	return n
}
