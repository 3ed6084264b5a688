package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// validation is validate_workflow's answer.
type validation struct {
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems"` // file:line:col: message
	Warnings []string `json:"warnings"`
	Tasks    int      `json:"tasks"`
	Actions  int      `json:"actions"`
	Triggers int      `json:"triggers"`
}

// validateWorkflow runs the loader `appliance validate` runs on the files
// of the call, laid out in a temporary folder of their own (the loader
// reads a folder), with no environment: no workspace of the server, and
// none of its environment variables, is read.
func (m *mcpCaller) validateWorkflow(_ context.Context, _ *mcp.CallToolRequest, in validateWorkflowIn) (string, any, error) {
	if len(in.Files) == 0 {
		return "", nil, &toolError{status: http.StatusBadRequest, msg: "files is empty: give at least one workflow file, e.g. {\".workflows/main.yaml\": \"tasks: ...\"}"}
	}
	dir, err := os.MkdirTemp("", "appliance-validate-")
	if err != nil {
		return "", nil, fmt.Errorf("validate workflow: %w", err)
	}
	defer os.RemoveAll(dir)
	for name, content := range in.Files {
		rel, err := workflowFilePath(name)
		if err != nil {
			return "", nil, &toolError{status: http.StatusBadRequest, msg: err.Error()}
		}
		full := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return "", nil, fmt.Errorf("validate workflow: %w", err)
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			return "", nil, fmt.Errorf("validate workflow: %w", err)
		}
	}
	out := validation{Problems: []string{}, Warnings: []string{}}
	ws, err := workspace.Load("validate", dir, map[string]string{})
	var problems workflow.Errors
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			out.Problems = append(out.Problems, p.Error())
		}
		return fmt.Sprintf("%d problems:\n%s", len(problems), strings.Join(out.Problems, "\n")), out, nil
	case err != nil:
		return "", nil, &toolError{status: http.StatusBadRequest, msg: err.Error()}
	}
	out.Valid = true
	for _, w := range ws.Warnings {
		out.Warnings = append(out.Warnings, w.Error())
	}
	out.Tasks, out.Actions, out.Triggers = len(ws.Tasks), len(ws.Actions), len(ws.Triggers)
	text := fmt.Sprintf("valid: %d tasks, %d actions, %d triggers", out.Tasks, out.Actions, out.Triggers)
	if len(out.Warnings) > 0 {
		text += "\nwarnings:\n" + strings.Join(out.Warnings, "\n")
	}
	return text, out, nil
}

// workflowFilePath is a file's path in the workspace: relative, inside
// it, with a bare YAML name placed in .workflows/.
func workflowFilePath(name string) (string, error) {
	p := path.Clean(strings.ReplaceAll(name, "\\", "/"))
	if name == "" || path.IsAbs(p) || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("file path %q must be relative to the workspace root, e.g. .workflows/main.yaml", name)
	}
	if !strings.Contains(p, "/") && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
		p = workspace.WorkflowDir + "/" + p
	}
	return p, nil
}

// logResource is the URI template of a job's log.
const logResource = "appliance://jobs/{id}/logs"

// addLogResource serves a job's log (its last maxLogLines lines) as a
// resource, through the same checks as get_job_logs.
func (m *mcpCaller) addLogResource(srv *mcp.Server) {
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "job_logs", Title: "A job's log", URITemplate: logResource, MIMEType: "text/plain",
		Description: "The last 2000 lines of a job's log, one line each as `HH:MM:SS step | line` (`!` for stderr), secrets masked.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		id, ok := strings.CutPrefix(uri, "appliance://jobs/")
		id, ok2 := strings.CutSuffix(id, "/logs")
		if !ok || !ok2 || id == "" || strings.Contains(id, "/") {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err := m.allowTool(toolGetJobLogs); err != nil {
			return nil, err
		}
		page, err := m.readLog(ctx, getJobLogsIn{JobID: id, Tail: maxLogLines})
		var te *toolError
		if errors.As(err, &te) && te.status == http.StatusNotFound {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, err
		}
		var text strings.Builder
		for _, l := range page.Lines {
			text.WriteString(formatLogLine(l))
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text.String()}}}, nil
	})
}

// debugTailLines is how many last lines of each failed step the
// debug_failed_job prompt quotes.
const debugTailLines = 30

// addDebugPrompt adds debug_failed_job: the failed steps of a job, their
// errors and last lines, gathered into a request to find the cause.
func (m *mcpCaller) addDebugPrompt(srv *mcp.Server) {
	srv.AddPrompt(&mcp.Prompt{
		Name: "debug_failed_job", Title: "Debug a failed job",
		Description: "Gather a failed job's failed steps, their error messages and last log lines, and ask for the cause and a fix.",
		Arguments:   []*mcp.PromptArgument{{Name: "job_id", Description: "the failed job's id (a UUID)", Required: true}},
	}, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		if err := m.allowTool(toolGetJob); err != nil {
			return nil, err
		}
		id := req.Params.Arguments["job_id"]
		var d wire.JobDetail
		if err := m.route(ctx, http.MethodGet, "/api/jobs/"+seg(id), nil, nil, &d); err != nil {
			return nil, err
		}
		var b strings.Builder
		fmt.Fprintf(&b, "Job %s of task %s in workspace %s ended %s.\n", d.JobID, d.TaskName, d.Workspace, d.Status)
		failed := 0
		for _, st := range d.Steps {
			if st.Status != engine.StepFailed {
				continue
			}
			failed++
			msg := "(no error message)"
			if st.ErrorMessage != nil {
				msg = *st.ErrorMessage
			}
			fmt.Fprintf(&b, "\nStep %q (action %s) failed, attempt %d: %s\nIts last log lines:\n", st.StepName, st.ActionName, st.Attempt, msg)
			page, err := m.readLog(ctx, getJobLogsIn{JobID: id, Step: st.StepName, Tail: debugTailLines})
			if err != nil {
				return nil, err
			}
			for _, l := range page.Lines {
				b.WriteString("    " + formatLogLine(l))
			}
		}
		if failed == 0 {
			b.WriteString("\nNo step failed.\n")
		}
		b.WriteString("\nFind the cause of the failure. Use get_task to read the task's flow and validate_workflow to check a corrected workflow, then propose the fix.")
		return &mcp.GetPromptResult{
			Description: "why job " + d.JobID + " failed",
			Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: b.String()}}},
		}, nil
	})
}
