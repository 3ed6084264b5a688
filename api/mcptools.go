package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
)

// The MCP tools (DESIGN.md "MCP endpoint"). Each is the API route it
// names, called in process (mcpcall.go): its input is turned into the
// route's parameters, query and body, and its answer into the tool's
// structured content plus a short text.
const (
	toolListWorkspaces   = "list_workspaces"
	toolListTasks        = "list_tasks"
	toolGetTask          = "get_task"
	toolExecuteTask      = "execute_task"
	toolListJobs         = "list_jobs"
	toolGetJob           = "get_job"
	toolGetJobLogs       = "get_job_logs"
	toolCancelJob        = "cancel_job"
	toolRerunJob         = "rerun_job"
	toolDecideApproval   = "decide_approval"
	toolValidateWorkflow = "validate_workflow"
	toolListWorkers      = "list_workers"
)

// Bounds of tool arguments beyond the request body limit.
const (
	maxWaitSeconds   = 60
	maxLogLines      = 2000
	defaultLogLines  = 200
	maxNameLen       = 1000
	maxWorkflowFiles = 200
)

// Tool inputs: the schema each tool announces is inferred from these
// (descriptions from the jsonschema tags), then given its enums and
// bounds by toolSchema.

type listWorkspacesIn struct{}

type listTasksIn struct {
	Workspace string `json:"workspace" jsonschema:"the workspace name, as list_workspaces shows it"`
}

type taskIn struct {
	Workspace string `json:"workspace" jsonschema:"the workspace name, as list_workspaces shows it"`
	Task      string `json:"task" jsonschema:"the task name (its key in the workflow, not its display name), as list_tasks shows it"`
}

type executeTaskIn struct {
	Workspace   string         `json:"workspace" jsonschema:"the workspace name, as list_workspaces shows it"`
	Task        string         `json:"task" jsonschema:"the task name, as list_tasks shows it"`
	Input       map[string]any `json:"input,omitempty" jsonschema:"the job's input: an object whose keys are the task's declared inputs (see get_task); an unknown key is refused, naming the declared ones"`
	WaitSeconds int            `json:"wait_seconds,omitempty" jsonschema:"wait up to this many seconds (at most 60) for the job to end, then answer its status and output; 0 answers the job id at once"`
}

type listJobsIn struct {
	Workspace  string   `json:"workspace,omitempty" jsonschema:"only jobs of this workspace"`
	Task       string   `json:"task,omitempty" jsonschema:"only jobs of this task (needs workspace)"`
	Status     []string `json:"status,omitempty" jsonschema:"only jobs in one of these statuses"`
	SourceType string   `json:"source_type,omitempty" jsonschema:"only jobs started this way"`
	Limit      int      `json:"limit,omitempty" jsonschema:"how many jobs per page (default 20, at most 100), newest first"`
	Cursor     string   `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, to read the next one"`
}

type jobIn struct {
	JobID string `json:"job_id" jsonschema:"the job's id (a UUID), as list_jobs or execute_task gives it"`
}

type getJobLogsIn struct {
	JobID  string `json:"job_id" jsonschema:"the job's id (a UUID)"`
	Step   string `json:"step,omitempty" jsonschema:"only this step's lines (a step name of get_job; _server for the server's own lines)"`
	Stream string `json:"stream,omitempty" jsonschema:"only lines of this output stream"`
	Tail   int    `json:"tail,omitempty" jsonschema:"the last N lines (default 200, at most 2000); not with after"`
	After  *int   `json:"after,omitempty" jsonschema:"page forward: the lines after this line number (the next of a previous answer; 0 = from the first line); not with tail"`
	Limit  int    `json:"limit,omitempty" jsonschema:"with after: at most this many lines (default 200, at most 2000)"`
}

type rerunJobIn struct {
	JobID      string         `json:"job_id" jsonschema:"the job to run again (a UUID)"`
	FromFailed bool           `json:"from_failed,omitempty" jsonschema:"for a failed or cancelled job: keep the outputs of the steps that completed and run only the others"`
	Input      map[string]any `json:"input,omitempty" jsonschema:"a new input for the re-run (default: the old job's input)"`
}

type decideApprovalIn struct {
	JobID           string         `json:"job_id" jsonschema:"the job waiting for the approval (a UUID)"`
	Step            string         `json:"step" jsonschema:"the approval step's name (status waiting in get_job)"`
	Approved        bool           `json:"approved" jsonschema:"true to approve and let the job go on, false to reject (the step fails)"`
	Input           map[string]any `json:"input,omitempty" jsonschema:"values the approval step asks the approver for, by name"`
	RejectionReason string         `json:"rejection_reason,omitempty" jsonschema:"why the step is rejected (with approved false)"`
}

type validateWorkflowIn struct {
	Files map[string]string `json:"files" jsonschema:"the workspace's files by path relative to its root, e.g. .workflows/deploy.yaml (a bare name like deploy.yaml goes in .workflows/) and any script file a workflow refers to; values are the file contents"`
}

type listWorkersIn struct {
	Limit  int `json:"limit,omitempty" jsonschema:"how many workers (default 20, at most 100)"`
	Offset int `json:"offset,omitempty" jsonschema:"skip this many workers"`
}

// toolSpec is a tool's announced definition.
type toolSpec struct {
	name, title, description string
	schema                   *jsonschema.Schema
	readOnly                 bool
}

// toolSpecs are built once: their schemas are inferred and patched here,
// and each /mcp request registers them on its own server.
func toolSpecs() []toolSpec {
	return []toolSpec{
		{name: toolListWorkspaces, title: "List workspaces", readOnly: true,
			description: "List the workspaces you can see: name, revision, how many tasks, actions and triggers, and load errors (file:line:col: message) if the workflow files are broken.",
			schema:      toolSchema[listWorkspacesIn](nil)},
		{name: toolListTasks, title: "List tasks", readOnly: true,
			description: "List the tasks of a workspace that you can see, each with its description, folder, mode and input definitions (name, type, required, default), and your permission (view or run) when access control is on.",
			schema:      toolSchema[listTasksIn](nameBounds("workspace"))},
		{name: toolGetTask, title: "Get a task", readOnly: true,
			description: "Show one task: its inputs, its flow (steps with actions and dependencies), its triggers and, for scheduled ones, the next run times.",
			schema:      toolSchema[taskIn](nameBounds("workspace", "task"))},
		{name: toolExecuteTask, title: "Run a task",
			description: "Start a job of a task with an input (checked as the API checks it: an unknown or missing key is refused with the declared inputs named). Answers the job id; with wait_seconds (up to 60) it waits for the job to end, sending progress notifications meanwhile, and answers its status, output and the errors of failed steps.",
			schema: toolSchema[executeTaskIn](func(s *jsonschema.Schema) {
				nameBounds("workspace", "task")(s)
				bound(s, "wait_seconds", 0, maxWaitSeconds)
			})},
		{name: toolListJobs, title: "List jobs", readOnly: true,
			description: "List jobs, newest first, with filters; answers a page and next_cursor (null on the last page) to pass as cursor for the next.",
			schema: toolSchema[listJobsIn](func(s *jsonschema.Schema) {
				nameBounds("workspace", "task", "cursor")(s)
				s.Properties["status"].Items.Enum = enumOf(engine.JobPending, engine.JobRunning, engine.JobCompleted, engine.JobFailed, engine.JobCancelled, engine.JobSkipped)
				s.Properties["source_type"].Enum = enumOf(engine.SourceAPI, engine.SourceUser, engine.SourceTrigger, engine.SourceWebhook, engine.SourceHook, engine.SourceTask, engine.SourceLocal)
				bound(s, "limit", 1, 100)
			})},
		{name: toolGetJob, title: "Get a job", readOnly: true,
			description: "Show a job: its status, input and output (secrets masked as ***), and each step with its status, error message, attempt and start and end times.",
			schema:      toolSchema[jobIn](nameBounds("job_id"))},
		{name: toolGetJobLogs, title: "Read a job's log", readOnly: true,
			description: "Read a job's log lines (secrets masked): by default its last 200 lines; tail for the last N (at most 2000), or after with the next of a previous answer to page forward. step and stream narrow it to one step's lines or to stdout or stderr.",
			schema: toolSchema[getJobLogsIn](func(s *jsonschema.Schema) {
				nameBounds("job_id", "step")(s)
				s.Properties["stream"].Enum = enumOf("stdout", "stderr")
				bound(s, "tail", 1, maxLogLines)
				bound(s, "limit", 1, maxLogLines)
				bound(s, "after", 0, -1)
			})},
		{name: toolCancelJob, title: "Cancel a job",
			description: "Cancel a pending or running job: its running steps are stopped. A job that already ended is refused.",
			schema:      toolSchema[jobIn](nameBounds("job_id"))},
		{name: toolRerunJob, title: "Re-run a job",
			description: "Start a new job of the same task on the workspace's current revision, with the old input unless a new one is given; with from_failed the steps that completed keep their outputs. Answers the new job's id.",
			schema:      toolSchema[rerunJobIn](nameBounds("job_id"))},
		{name: toolDecideApproval, title: "Approve or reject",
			description: "Decide an approval step that is waiting: approve (the job goes on) or reject it (the step fails), with the values it asks for and an optional reason.",
			schema: toolSchema[decideApprovalIn](func(s *jsonschema.Schema) {
				nameBounds("job_id", "step")(s)
				maxLen(s, "rejection_reason", 10000)
			})},
		{name: toolValidateWorkflow, title: "Validate workflow files", readOnly: true,
			description: "Check workflow files as `appliance validate` does, without touching any workspace on the server: answers every problem as file:line:col: message, or the counts of tasks, actions and triggers and any warnings.",
			schema: toolSchema[validateWorkflowIn](func(s *jsonschema.Schema) {
				n := maxWorkflowFiles
				s.Properties["files"].MaxProperties = &n
			})},
		{name: toolListWorkers, title: "List workers", readOnly: true,
			description: "List the workers that run steps: their name, tags, status (online, offline) and last heartbeat.",
			schema: toolSchema[listWorkersIn](func(s *jsonschema.Schema) {
				bound(s, "limit", 1, 100)
				bound(s, "offset", 0, -1)
			})},
	}
}

// toolSchema is the input schema inferred from In, patched.
func toolSchema[In any](patch func(*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool input schema: %v", err)) // a programming error, caught by every test
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	if patch != nil {
		patch(s)
	}
	return s
}

// nameBounds caps string properties: names and ids are short.
func nameBounds(props ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		for _, p := range props {
			maxLen(s, p, maxNameLen)
		}
	}
}

func maxLen(s *jsonschema.Schema, prop string, n int) {
	s.Properties[prop].MaxLength = &n
}

// bound sets an integer property's minimum and maximum (max < 0: none).
func bound(s *jsonschema.Schema, prop string, min, max int) {
	p := s.Properties[prop]
	lo := float64(min)
	p.Minimum = &lo
	if max >= 0 {
		hi := float64(max)
		p.Maximum = &hi
	}
}

func enumOf(values ...string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// seg escapes one path segment of a route.
func seg(s string) string { return url.PathEscape(s) }

// The handlers: each answers its structured content and a short text.

func (m *mcpCaller) listWorkspaces(ctx context.Context, _ *mcp.CallToolRequest, _ listWorkspacesIn) (string, any, error) {
	var items []wire.Workspace
	if err := m.route(ctx, http.MethodGet, "/api/workspaces", nil, nil, &items); err != nil {
		return "", nil, err
	}
	names := make([]string, len(items))
	for i, w := range items {
		names[i] = w.Name
		if len(w.Errors) > 0 {
			names[i] += " (load errors)"
		}
	}
	return fmt.Sprintf("%d workspaces: %s", len(items), strings.Join(names, ", ")), map[string]any{"workspaces": items}, nil
}

// taskWithInputs is a task of list_tasks: the list's fields and the
// task's input definitions.
type taskWithInputs struct {
	wire.Task
	Input any `json:"input"`
}

func (m *mcpCaller) listTasks(ctx context.Context, _ *mcp.CallToolRequest, in listTasksIn) (string, any, error) {
	var items []wire.Task
	if err := m.route(ctx, http.MethodGet, "/api/workspaces/"+seg(in.Workspace)+"/tasks", nil, nil, &items); err != nil {
		return "", nil, err
	}
	out := make([]taskWithInputs, len(items))
	names := make([]string, len(items))
	for i, t := range items {
		var d wire.TaskDetail
		if err := m.route(ctx, http.MethodGet, "/api/workspaces/"+seg(in.Workspace)+"/tasks/"+seg(t.Name), nil, nil, &d); err != nil {
			return "", nil, err
		}
		out[i] = taskWithInputs{Task: t, Input: d.Input}
		names[i] = t.Name
	}
	return fmt.Sprintf("%d tasks in %s: %s", len(items), in.Workspace, strings.Join(names, ", ")), map[string]any{"tasks": out}, nil
}

func (m *mcpCaller) getTask(ctx context.Context, _ *mcp.CallToolRequest, in taskIn) (string, any, error) {
	var d map[string]any
	if err := m.route(ctx, http.MethodGet, "/api/workspaces/"+seg(in.Workspace)+"/tasks/"+seg(in.Task), nil, nil, &d); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("task %s of workspace %s", in.Task, in.Workspace), d, nil
}

func (m *mcpCaller) listJobs(ctx context.Context, _ *mcp.CallToolRequest, in listJobsIn) (string, any, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("workspace", in.Workspace)
	set("task_name", in.Task)
	set("status", strings.Join(in.Status, ","))
	set("source_type", in.SourceType)
	set("cursor", in.Cursor)
	if in.Limit > 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	var list wire.JobList
	if err := m.route(ctx, http.MethodGet, "/api/jobs", q, nil, &list); err != nil {
		return "", nil, err
	}
	text := fmt.Sprintf("%d of %d jobs", len(list.Items), list.Total)
	if list.NextCursor != nil {
		text += "; more with cursor " + *list.NextCursor
	}
	return text, list, nil
}

func (m *mcpCaller) getJob(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (string, any, error) {
	var d wire.JobDetail
	if err := m.route(ctx, http.MethodGet, "/api/jobs/"+seg(in.JobID), nil, nil, &d); err != nil {
		return "", nil, err
	}
	return jobSummary(&d), d, nil
}

// jobSummary is a job in a line: its task, status and failed steps.
func jobSummary(d *wire.JobDetail) string {
	text := fmt.Sprintf("job %s of %s/%s: %s", d.JobID, d.Workspace, d.TaskName, d.Status)
	var failed []string
	for _, st := range d.Steps {
		if st.Status == engine.StepFailed {
			msg := st.StepName
			if st.ErrorMessage != nil {
				msg += " (" + *st.ErrorMessage + ")"
			}
			failed = append(failed, msg)
		}
	}
	if len(failed) > 0 {
		text += "; failed steps: " + strings.Join(failed, ", ")
	}
	return text
}

func (m *mcpCaller) cancelJob(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (string, any, error) {
	var a wire.StatusAnswer
	if err := m.route(ctx, http.MethodPost, "/api/jobs/"+seg(in.JobID)+"/cancel", nil, nil, &a); err != nil {
		return "", nil, err
	}
	return "job " + in.JobID + " cancelled", map[string]any{"job_id": in.JobID, "status": a.Status}, nil
}

func (m *mcpCaller) rerunJob(ctx context.Context, _ *mcp.CallToolRequest, in rerunJobIn) (string, any, error) {
	var a wire.JobCreated
	body := wire.RerunRequest{Input: in.Input, FromFailed: in.FromFailed}
	if err := m.route(ctx, http.MethodPost, "/api/jobs/"+seg(in.JobID)+"/rerun", nil, body, &a); err != nil {
		return "", nil, err
	}
	return "job " + in.JobID + " re-run as job " + a.JobID, map[string]any{"job_id": a.JobID, "rerun_of": in.JobID}, nil
}

func (m *mcpCaller) decideApproval(ctx context.Context, _ *mcp.CallToolRequest, in decideApprovalIn) (string, any, error) {
	approved := in.Approved
	body := wire.ApproveRequest{Approved: &approved, Input: in.Input, RejectionReason: in.RejectionReason}
	var a wire.StatusAnswer
	if err := m.route(ctx, http.MethodPost, "/api/jobs/"+seg(in.JobID)+"/steps/"+seg(in.Step)+"/approve", nil, body, &a); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("step %s of job %s %s", in.Step, in.JobID, a.Status), map[string]any{"job_id": in.JobID, "step": in.Step, "status": a.Status}, nil
}

func (m *mcpCaller) listWorkers(ctx context.Context, _ *mcp.CallToolRequest, in listWorkersIn) (string, any, error) {
	q := url.Values{}
	if in.Limit > 0 {
		q.Set("limit", strconv.Itoa(in.Limit))
	}
	if in.Offset > 0 {
		q.Set("offset", strconv.Itoa(in.Offset))
	}
	var list wire.List[wire.Worker]
	if err := m.route(ctx, http.MethodGet, "/api/workers", q, nil, &list); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("%d of %d workers", len(list.Items), list.Total), list, nil
}
