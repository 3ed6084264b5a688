package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
)

// /mcp serves the Model Context Protocol (DESIGN.md "MCP endpoint")
// through the official SDK's streamable HTTP transport, stateless: each
// POST is one exchange, authenticated on its own by the global
// middleware like any /api request (no server-side session to lose or
// hijack). Each request gets an mcp.Server of its own, whose tools act as
// its caller; GET and DELETE (a stateful session's stream and end) are
// 405 with Allow: POST, as for any route under another method.

const mcpRoute = "/mcp"

// mcpShared is what every /mcp request's server shares.
type mcpShared struct {
	specs   []toolSpec
	schemas *mcp.SchemaCache
}

func newMCPShared() *mcpShared {
	return &mcpShared{specs: toolSpecs(), schemas: mcp.NewSchemaCache()}
}

// mcpInstructions tell an assistant what the server is, once per session.
const mcpInstructions = "appliance runs workflows: workspaces hold tasks, a task's run is a job made of steps. " +
	"Find a task with list_workspaces and list_tasks, read its inputs with get_task, run it with execute_task " +
	"(wait_seconds to wait for the end), and follow jobs with list_jobs, get_job and get_job_logs. " +
	"You act as the user whose token or API key you hold: tasks you may not see do not exist for you, " +
	"and secrets show as ***."

func (s *server) serveMCP(c echo.Context) error {
	r := c.Request()
	// The SDK answers these refusals in plain text; the API's are JSON.
	jsonOK, streamOK := acceptsMCP(r.Header.Values("Accept"))
	if !jsonOK || !streamOK {
		return httpx.BadRequest("Accept must list both application/json and text/event-stream (the MCP streamable HTTP transport)")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return httpx.BodyTooLarge(s.cfg.MaxRequestBody)
		}
		return err
	}
	if !json.Valid(body) {
		return httpx.BadRequest("the body is not a JSON-RPC message (invalid JSON)")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	caller := &mcpCaller{s: s, p: auth.Caller(c), http: c}
	srv := s.mcpServer(caller)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// guardBrowsers checked Host and Origin against the server's own
		// names, allowed_hosts and allowed_origins.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        s.cfg.MaxRequestBody,
	})
	h.ServeHTTP(&jsonErrors{ResponseWriter: c.Response()}, r)
	return nil
}

// acceptsMCP reports whether an Accept header lists JSON and SSE, which
// the streamable HTTP transport requires of a POST.
func acceptsMCP(values []string) (jsonOK, streamOK bool) {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// mcpServer is the MCP server of one request: every tool, the job log
// resource and the debugging prompt, acting as caller. tools/list shows
// only the tools its key's scopes allow.
func (s *server) mcpServer(caller *mcpCaller) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "appliance", Title: "appliance workflows", Version: s.cfg.Version}, &mcp.ServerOptions{
		Instructions: mcpInstructions,
		SchemaCache:  s.mcp.schemas,
		// No logging capability; tools, resources and prompts are
		// announced as they are added (a stateless server never sends a
		// list-changed notification).
		Capabilities: &mcp.ServerCapabilities{},
	})
	for _, spec := range s.mcp.specs {
		tool := &mcp.Tool{Name: spec.name, Title: spec.title, Description: spec.description, InputSchema: spec.schema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: spec.readOnly, Title: spec.title}}
		switch spec.name {
		case toolListWorkspaces:
			addTool(srv, caller, tool, caller.listWorkspaces)
		case toolListTasks:
			addTool(srv, caller, tool, caller.listTasks)
		case toolGetTask:
			addTool(srv, caller, tool, caller.getTask)
		case toolExecuteTask:
			addTool(srv, caller, tool, caller.executeTask)
		case toolListJobs:
			addTool(srv, caller, tool, caller.listJobs)
		case toolGetJob:
			addTool(srv, caller, tool, caller.getJob)
		case toolGetJobLogs:
			addTool(srv, caller, tool, caller.getJobLogs)
		case toolCancelJob:
			addTool(srv, caller, tool, caller.cancelJob)
		case toolRerunJob:
			addTool(srv, caller, tool, caller.rerunJob)
		case toolDecideApproval:
			addTool(srv, caller, tool, caller.decideApproval)
		case toolValidateWorkflow:
			addTool(srv, caller, tool, caller.validateWorkflow)
		case toolListWorkers:
			addTool(srv, caller, tool, caller.listWorkers)
		default:
			panic("mcp: no handler for tool " + spec.name)
		}
	}
	caller.addLogResource(srv)
	caller.addDebugPrompt(srv)
	srv.AddReceivingMiddleware(caller.filterToolList)
	return srv
}

// addTool registers a tool whose handler answers a short text and its
// structured content; the handler runs only within the caller's scopes,
// and ends when the /mcp request does (a client that hung up).
func addTool[In any](srv *mcp.Server, caller *mcpCaller, tool *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (string, any, error)) {
	mcp.AddTool(srv, tool, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		if err := caller.allowTool(tool.Name); err != nil {
			return nil, nil, err
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(caller.http.Request().Context(), cancel)
		defer stop()
		text, out, err := h(ctx, req, in)
		if err != nil {
			// The SDK makes it a result with isError and this text.
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, out, nil
	})
}

// allowTool refuses a tool beyond the caller's key's scopes, naming the
// scope it lacks (as a 403 of the API does).
func (m *mcpCaller) allowTool(name string) error {
	if m.p == nil {
		return nil
	}
	need := toolScopes[name]
	if m.p.Allows(need) {
		return nil
	}
	err := missingScope(m.p, need, "the tool "+name)
	status, msg := m.s.classify(err)
	return &toolError{status: status, msg: msg}
}

// filterToolList leaves out of tools/list the tools the caller's key may
// not call.
func (m *mcpCaller) filterToolList(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		list, ok := res.(*mcp.ListToolsResult)
		if err != nil || !ok || m.p == nil {
			return res, err
		}
		list.Tools = slices.DeleteFunc(list.Tools, func(t *mcp.Tool) bool { return !m.p.Allows(toolScopes[t.Name]) })
		return list, nil
	}
}

// ToolsFor lists the tools a key with these scopes may call (none: all),
// for the docs and tests.
func ToolsFor(scopes []accounts.Scope) []string {
	var out []string
	for _, spec := range toolSpecs() {
		if accounts.Allows(scopes, toolScopes[spec.name]) {
			out = append(out, spec.name)
		}
	}
	return out
}

// jsonErrors turns the SDK's plain-text refusals (an unsupported protocol
// version, a bad payload) into the API's {"error": "..."}; its JSON-RPC
// errors and its streams pass as they are.
type jsonErrors struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer
}

func (w *jsonErrors) WriteHeader(status int) {
	if status >= http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status, w.buf = status, &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrors) Write(p []byte) (int, error) {
	if w.buf == nil {
		return w.ResponseWriter.Write(p)
	}
	w.buf.Write(p)
	msg := strings.TrimSpace(w.buf.String())
	if msg == "" {
		msg = strings.ToLower(http.StatusText(w.status))
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("X-Content-Type-Options")
	data, _ := json.Marshal(wire.Error{Error: strings.ToLower(msg[:1]) + msg[1:]})
	w.ResponseWriter.WriteHeader(w.status)
	w.buf = nil
	w.status = 0
	if _, err := w.ResponseWriter.Write(append(data, '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *jsonErrors) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *jsonErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }
