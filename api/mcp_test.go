package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/openapitest"
)

// bearer adds a token to every request, as an assistant's MCP
// configuration does.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// mcpClient is an MCP session of the SDK's own client with the fixture's
// /mcp, over real HTTP; every answer is checked against the OpenAPI
// document. progress collects the progress notifications it receives.
type mcpClient struct {
	t        testing.TB
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress []string
}

func (f *fixture) mcp(t testing.TB, token string) *mcpClient {
	t.Helper()
	m := &mcpClient{t: t}
	client := mcp.NewClient(&mcp.Implementation{Name: "appliance-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.progress = append(m.progress, req.Params.Message)
		},
	})
	hc := &http.Client{Transport: bearer{token: token, base: openapitest.Transport(nil)}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: f.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	m.cs = cs
	return m
}

// tools lists the tools the session may call, sorted.
func (m *mcpClient) tools() []string {
	m.t.Helper()
	res, err := m.cs.ListTools(context.Background(), nil)
	if err != nil {
		m.t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	sort.Strings(names)
	return names
}

// call calls a tool and returns its result; a protocol error fails.
func (m *mcpClient) call(name string, args any) *mcp.CallToolResult {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured content.
func (m *mcpClient) ok(name string, args any) map[string]any {
	m.t.Helper()
	res := m.call(name, args)
	if res.IsError {
		m.t.Fatalf("%s(%v) failed: %s", name, args, text(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		m.t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		m.t.Fatalf("%s structured content %s: %v", name, data, err)
	}
	if text(res) == "" {
		m.t.Errorf("%s answered no text", name)
	}
	return out
}

// refused calls a tool that must fail with a message mentioning want.
func (m *mcpClient) refused(name string, args any, want string) {
	m.t.Helper()
	res := m.call(name, args)
	if !res.IsError {
		m.t.Fatalf("%s(%v) succeeded, want an error mentioning %q: %s", name, args, want, text(res))
	}
	if !strings.Contains(text(res), want) {
		m.t.Fatalf("%s(%v) error %q, want it to mention %q", name, args, text(res), want)
	}
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// apiKey creates a key of the user with these scopes (none: all).
func (f *authFixture) apiKey(access string, scopes ...string) string {
	f.t.Helper()
	body := map[string]any{"name": "assistant " + strings.Join(scopes, "+")}
	if scopes != nil {
		body["scopes"] = scopes
	}
	r := f.as(access, "POST", "/api/auth/api-keys", body).expect(200).object()
	got, _ := r["scopes"].([]any)
	if len(scopes) > 0 && len(got) != len(scopes) {
		f.t.Fatalf("key scopes %v, want %v", got, scopes)
	}
	return r["key"].(string)
}

func TestMCPListsOnlyTheToolsAKeysScopesAllow(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	all := api.ToolsFor(nil)
	if len(all) != 12 {
		t.Fatalf("%d tools, want the 12 of DESIGN.md: %v", len(all), all)
	}
	cases := []struct {
		scopes []string
		want   []string
	}{
		{nil, all},
		{[]string{"read"}, []string{"get_job", "get_job_logs", "get_task", "list_jobs", "list_tasks", "list_workers", "list_workspaces", "validate_workflow"}},
		{[]string{"run"}, []string{"cancel_job", "execute_task", "rerun_job"}},
		{[]string{"approve"}, []string{"decide_approval"}},
		{[]string{"read", "run"}, []string{"cancel_job", "execute_task", "get_job", "get_job_logs", "get_task", "list_jobs", "list_tasks", "list_workers", "list_workspaces", "rerun_job", "validate_workflow"}},
		{[]string{"admin"}, nil},
	}
	for _, tc := range cases {
		key := f.apiKey(access, tc.scopes...)
		got := f.mcp(t, key).tools()
		want := slices.Clone(tc.want)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("scopes %v: tools %v, want %v", tc.scopes, got, want)
		}
	}
	// The access token of a login has every scope.
	if got := f.mcp(t, access).tools(); len(got) != 12 {
		t.Errorf("a login's token lists %v, want all 12 tools", got)
	}

	// A call beyond the key's scopes is refused naming the scope, and the
	// same key is refused by the route the tool stands for.
	readOnly := f.apiKey(access, "read")
	m := f.mcp(t, readOnly)
	m.refused("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "x"}}, `lacks the "run" scope`)
	f.as(readOnly, "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}).expectError(403, `"run" scope`)
	f.as(readOnly, "GET", "/api/workspaces", nil).expect(200)
	runOnly := f.apiKey(access, "run")
	f.as(runOnly, "GET", "/api/jobs", nil).expectError(403, `"read" scope`)
	f.as(runOnly, "DELETE", "/api/auth/api-keys/appk_xxxx", nil).expectError(403, `"admin" scope`)
}

// TestEveryRouteHasAScope: every authenticated /api route is in the scope
// table, and the table names no route that is not one.
func TestEveryRouteHasAScope(t *testing.T) {
	table := api.RouteScopes()
	routes := map[string]bool{}
	for r := range routeTable(t) {
		method, path, _ := strings.Cut(r, " ")
		if !strings.HasPrefix(path, "/api/") {
			continue
		}
		key := method + " " + strings.NewReplacer("{", ":", "}", "").Replace(path)
		routes[key] = true
		public := map[string]bool{"GET /api/config": true, "GET /api/openapi.json": true, "POST /api/auth/login": true,
			"POST /api/auth/refresh": true, "POST /api/auth/logout": true, "GET /api/auth/oidc/:provider": true, "GET /api/auth/oidc/:provider/callback": true}
		if _, ok := table[key]; !ok && !public[key] {
			t.Errorf("route %s has no scope in api/scopes.go", key)
		}
	}
	for key := range table {
		if !routes[key] {
			t.Errorf("the scope table names %s, which is no route", key)
		}
	}
	for tool, scope := range api.ToolScopes() {
		if !slices.Contains(accounts.AllScopes, scope) {
			t.Errorf("tool %s has scope %q", tool, scope)
		}
	}
}

// approvalWorkflow adds a task waiting for an approval and one with a
// secret input to the fixture's workspace.
const approvalWorkflow = `
tasks:
  gated:
    input:
      token: {type: string, secret: true}
    flow:
      gate:
        type: approval
        message: ship it?
`

func TestMCPToolsHappyPath(t *testing.T) {
	f := newFixture(t)
	writeFile(t, f.wsDir+"/.workflows/approve.yaml", approvalWorkflow, 0o644)
	m := f.mcp(t, "")
	eventually(t, "the approval task to load", func() bool {
		return f.api("GET", "/api/workspaces/main/tasks/gated", nil).status == 200
	})

	ws := m.ok("list_workspaces", map[string]any{})["workspaces"].([]any)
	if len(ws) != 2 {
		t.Fatalf("workspaces %v, want main and broken", ws)
	}
	tasks := m.ok("list_tasks", map[string]any{"workspace": "main"})["tasks"].([]any)
	var hello map[string]any
	for _, tk := range tasks {
		if tk.(map[string]any)["name"] == "hello" {
			hello = tk.(map[string]any)
		}
	}
	if in, _ := hello["input"].(map[string]any); in["name"] == nil {
		t.Fatalf("list_tasks hello = %v, want its input definitions", hello)
	}
	task := m.ok("get_task", map[string]any{"workspace": "main", "task": "hello"})
	if task["flow"] == nil || len(task["triggers"].([]any)) == 0 {
		t.Fatalf("get_task = %v, want its flow and triggers", task)
	}

	id := m.ok("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "ada"}})["job_id"].(string)
	m.refused("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"nmae": "ada"}}, `"nmae"`)
	jobs := m.ok("list_jobs", map[string]any{"workspace": "main", "task": "hello", "status": []string{"pending", "running"}})
	if jobs["total"].(float64) != 1 {
		t.Fatalf("list_jobs = %v, want the one job", jobs)
	}
	w := f.register("w1")
	f.claimStep(w, id, "say")
	f.worker("POST", "/worker/jobs/"+id+"/steps/say/start", map[string]any{"worker_id": w}).expect(200)
	f.pushLogs(w, id, "say", "hello ada", "second line")
	job := m.ok("get_job", map[string]any{"job_id": id})
	if job["status"] != "running" || len(job["steps"].([]any)) == 0 {
		t.Fatalf("get_job = %v", job)
	}
	logs := m.ok("get_job_logs", map[string]any{"job_id": id, "step": "say"})
	lines := logs["lines"].([]any)
	if len(lines) != 2 || lines[0].(map[string]any)["line"] != "hello ada" {
		t.Fatalf("get_job_logs = %v", logs)
	}
	page := m.ok("get_job_logs", map[string]any{"job_id": id, "after": 0, "limit": 1})
	if page["count"].(float64) != 1 || page["more"] != true || page["next"].(float64) != 1 {
		t.Fatalf("get_job_logs after 0 limit 1 = %v", page)
	}
	if n := m.ok("get_job_logs", map[string]any{"job_id": id, "step": "say", "stream": "stderr"})["count"].(float64); n != 0 {
		t.Fatalf("stderr lines = %v, want none", n)
	}
	res, err := m.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "appliance://jobs/" + id + "/logs"})
	if err != nil || !strings.Contains(res.Contents[0].Text, "say | hello ada") {
		t.Fatalf("log resource = %v, %v", res, err)
	}
	workers := m.ok("list_workers", map[string]any{})
	if workers["total"].(float64) != 1 {
		t.Fatalf("list_workers = %v", workers)
	}
	m.ok("cancel_job", map[string]any{"job_id": id})
	m.refused("cancel_job", map[string]any{"job_id": id}, "")
	rerun := m.ok("rerun_job", map[string]any{"job_id": id})["job_id"].(string)
	if rerun == id || f.jobStatus(rerun) == "" {
		t.Fatalf("rerun_job answered %q", rerun)
	}
	m.ok("cancel_job", map[string]any{"job_id": rerun})

	// The prompt gathers a failed job's steps, errors and last lines.
	failed := f.execute("bob")
	f.endStep(w, failed, "say", nil, 1, "exit status 1")
	eventually(t, "the job to fail", func() bool { return f.jobStatus(failed) == "failed" })
	prompt, err := m.cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: "debug_failed_job", Arguments: map[string]string{"job_id": failed}})
	if err != nil || !strings.Contains(prompt.Messages[0].Content.(*mcp.TextContent).Text, `Step "say"`) {
		t.Fatalf("debug_failed_job = %v, %v", prompt, err)
	}

	// An approval decided by a tool, its secret input masked as in answers.
	gated := m.ok("execute_task", map[string]any{"workspace": "main", "task": "gated", "input": map[string]any{"token": "tok-secret-9"}})["job_id"].(string)
	eventually(t, "the approval to wait", func() bool {
		res := m.call("decide_approval", map[string]any{"job_id": gated, "step": "gate", "approved": true})
		return !res.IsError
	})
	done := m.ok("get_job", map[string]any{"job_id": gated})
	if done["status"] != "completed" {
		t.Fatalf("gated job after approval = %v", done)
	}
	if data, _ := json.Marshal(done); strings.Contains(string(data), "tok-secret-9") || !strings.Contains(string(data), "***") {
		t.Fatalf("get_job shows the secret input unmasked: %s", data)
	}

	valid := m.ok("validate_workflow", map[string]any{"files": map[string]any{"main.yaml": "tasks:\n  t:\n    flow:\n      s: {type: script, script: echo hi}\n"}})
	if valid["valid"] != true || valid["tasks"].(float64) != 1 {
		t.Fatalf("validate_workflow on a good file = %v", valid)
	}
	bad := m.ok("validate_workflow", map[string]any{"files": map[string]any{".workflows/main.yaml": "tasks:\n  t:\n    flow:\n      s: {action: missing}\n"}})
	problems := bad["problems"].([]any)
	if bad["valid"] != false || len(problems) == 0 || !strings.HasPrefix(problems[0].(string), ".workflows/main.yaml:4:") {
		t.Fatalf("validate_workflow on a bad file = %v", bad)
	}
	m.refused("validate_workflow", map[string]any{"files": map[string]any{"../escape.yaml": "x"}}, "relative")
}

func TestMCPExecuteTaskWaitsForTheEndWithProgress(t *testing.T) {
	f := newFixture(t)
	m := f.mcp(t, "")
	w := f.register("w1")
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "execute_task", Arguments: map[string]any{
			"workspace": "main", "task": "hello", "input": map[string]any{"name": "ada"}, "wait_seconds": 60}}
		params.SetProgressToken("wait-1")
		res, err := m.cs.CallTool(context.Background(), params)
		got <- answer{res, err}
	}()
	var id string
	eventually(t, "the job to be created", func() bool {
		list := f.api("GET", "/api/jobs?workspace=main", nil).expect(200).object()["items"].([]any)
		if len(list) == 1 {
			id = list[0].(map[string]any)["job_id"].(string)
		}
		return id != ""
	})
	f.runStep(w, id, "say", map[string]any{"greeting": "hi"})
	f.runStep(w, id, "after", map[string]any{})
	a := <-got
	if a.err != nil || a.res.IsError {
		t.Fatalf("execute_task with wait: %v %v", a.err, a.res)
	}
	out := a.res.StructuredContent.(map[string]any)
	if out["status"] != "completed" || out["ended"] != true {
		t.Fatalf("execute_task answered %v, want the completed job", out)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.ContainsFunc(m.progress, func(s string) bool { return strings.Contains(s, "step say") }) {
		t.Fatalf("progress notifications %v, want the steps' changes", m.progress)
	}
	// A short wait answers the job as it stands.
	res := m.ok("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "bo"}, "wait_seconds": 1})
	if res["ended"] != false || res["status"] != "pending" {
		t.Fatalf("execute_task after a wait that ran out = %v", res)
	}
}

// A wait ends when the key it runs on is revoked, as open streams do.
func TestMCPWaitEndsWhenTheKeyIsRevoked(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	key := f.apiKey(access, "read", "run")
	m := f.mcp(t, key)
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		got <- m.call("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "ada"}, "wait_seconds": 60})
	}()
	eventually(t, "the job to be created", func() bool {
		return f.as(access, "GET", "/api/jobs", nil).expect(200).object()["total"].(float64) == 1
	})
	keys := f.as(access, "GET", "/api/auth/api-keys", nil).expect(200).array()
	for _, k := range keys {
		f.as(access, "DELETE", "/api/auth/api-keys/"+k["prefix"].(string), nil).expect(200)
	}
	select {
	case res := <-got:
		if !res.IsError || !strings.Contains(text(res), "revoked") {
			t.Fatalf("wait after revocation: %s", text(res))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait went on after its key was revoked")
	}
}

func TestMCPUnderTheACL(t *testing.T) {
	f := newACLFixture(t)
	id := f.run("hello")
	other := f.run("other")
	viewer := f.mcp(t, f.tokens[roleView])
	// Lists are filtered; a hidden job does not exist; view cannot act.
	jobs := viewer.ok("list_jobs", map[string]any{})
	if jobs["total"].(float64) != 1 {
		t.Fatalf("viewer list_jobs = %v, want only the hello job", jobs)
	}
	viewer.refused("get_job", map[string]any{"job_id": other}, "not found")
	viewer.refused("get_job_logs", map[string]any{"job_id": other}, "not found")
	viewer.ok("get_job", map[string]any{"job_id": id})
	viewer.refused("cancel_job", map[string]any{"job_id": id}, "may view")
	viewer.refused("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "x"}}, "may view")
	viewer.refused("rerun_job", map[string]any{"job_id": id}, "may view")
	viewer.refused("decide_approval", map[string]any{"job_id": id, "step": "say", "approved": true}, "may view")
	tasks := viewer.ok("list_tasks", map[string]any{"workspace": "main"})["tasks"].([]any)
	if len(tasks) != 1 {
		t.Fatalf("viewer list_tasks = %v, want hello only", tasks)
	}
	denied := f.mcp(t, f.tokens[roleDeny])
	denied.refused("get_job", map[string]any{"job_id": id}, "not found")
	if ws := denied.ok("list_workspaces", map[string]any{})["workspaces"].([]any); len(ws) != 0 {
		t.Fatalf("a user with no task sees workspaces %v", ws)
	}
	runner := f.mcp(t, f.tokens[roleRun])
	runner.ok("cancel_job", map[string]any{"job_id": id})
}

// The HTTP side of /mcp answers as /api does: JSON errors, 401 with
// WWW-Authenticate, 405 with Allow, the Host and Origin checks, the body
// limit.
func TestMCPEndpointRefusesAsTheAPIDoes(t *testing.T) {
	f := newAuthFixture(t, nil)
	accept := map[string]string{"Accept": "application/json, text/event-stream"}
	init := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	r := f.do("POST", "/mcp", init, accept)
	r.expectError(401, "token")
	if r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("401 WWW-Authenticate = %q", r.header.Get("WWW-Authenticate"))
	}
	f.addUser("ada@example.com", "pw", false)
	access, _ := f.login("ada@example.com", "pw")
	// Stateless: no session stream to GET, no session to DELETE.
	for _, method := range []string{"GET", "DELETE"} {
		r = f.do(method, "/mcp", nil, map[string]string{"Authorization": "Bearer " + access})
		if r.status != 405 || r.header.Get("Allow") != "POST" {
			t.Fatalf("%s /mcp = %d Allow %q, want 405 Allow POST", method, r.status, r.header.Get("Allow"))
		}
	}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + access}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	f.do("POST", "/mcp", init, with(nil)).expectError(400, "Accept")
	f.do("POST", "/mcp", "{not json", with(accept)).expectError(400, "JSON")
	f.do("POST", "/mcp", init, with(map[string]string{"Accept": accept["Accept"], "Host": "evil.example"})).expectError(421, "evil.example")
	f.do("POST", "/mcp", init, with(map[string]string{"Accept": accept["Accept"], "Origin": "https://evil.example"})).expectError(403, "cross-origin")
	f.do("POST", "/mcp", init, with(map[string]string{"Accept": accept["Accept"], "Content-Type": "text/plain"})).expectError(415, "JSON")
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_job","arguments":{"job_id":"` + strings.Repeat("x", 11<<20) + `"}}}`
	f.do("POST", "/mcp", big, with(accept)).expectError(413, "")
	f.do("POST", "/mcp", init, with(map[string]string{"Accept": accept["Accept"], "MCP-Protocol-Version": "1999-01-01"})).expectError(400, "protocol version")
}

// Bad input is a clear MCP error: an unknown tool a protocol error, wrong
// argument types and unknown keys a tool error naming them, a missing job
// "not found".
func TestMCPBadInputIsAClearError(t *testing.T) {
	f := newFixture(t)
	m := f.mcp(t, "")
	_, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "drop_tables", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), `unknown tool "drop_tables"`) {
		t.Fatalf("unknown tool: %v", err)
	}
	m.refused("get_job", map[string]any{"job_id": 42}, "job_id")
	m.refused("get_job", map[string]any{"job_id": "x", "extra": true}, "extra")
	m.refused("get_job", map[string]any{}, "job_id")
	m.refused("get_job", map[string]any{"job_id": "0195c3a0-0000-7000-8000-000000000000"}, "not found")
	m.refused("get_job_logs", map[string]any{"job_id": "0195c3a0-0000-7000-8000-000000000000", "tail": 5000}, "tail")
	m.refused("get_job_logs", map[string]any{"job_id": "0195c3a0-0000-7000-8000-000000000000", "stream": "stdin"}, "stream")
	m.refused("execute_task", map[string]any{"workspace": "main", "task": "hello", "wait_seconds": 61}, "wait_seconds")
	m.refused("execute_task", map[string]any{"workspace": "main", "task": "nope"}, "not found")
	m.refused("list_jobs", map[string]any{"status": []string{"exploded"}}, "status")
	m.refused("get_task", map[string]any{"workspace": strings.Repeat("w", 5000), "task": "t"}, "workspace")
}

// FuzzMCPToolArguments: whatever a tool's arguments hold, the answer is
// a tool result or a JSON-RPC error, never a broken exchange or a stuck
// call, and the server goes on answering.
func FuzzMCPToolArguments(f *testing.F) {
	tmp := f.TempDir()
	dir := filepath.Join(tmp, "main")
	writeFile(f, filepath.Join(dir, ".workflows", "main.yaml"), mainWorkflow, 0o644)
	fx := startAPI(f, tmp, map[string]string{"main": dir})
	m := fx.mcp(f, "")
	tools := api.ToolsFor(nil)
	f.Add(uint8(0), []byte(`{}`))
	f.Add(uint8(3), []byte(`{"workspace":"main","task":"hello","input":{"name":"x"}}`))
	f.Add(uint8(3), []byte(`{"workspace":"main","task":"hello","input":{"name":1,"times":"x"},"wait_seconds":-1}`))
	f.Add(uint8(6), []byte(`{"job_id":"0195c3a0-0000-7000-8000-000000000000","after":-3,"tail":2}`))
	f.Add(uint8(9), []byte(`{"job_id":"../../etc","step":"%2e%2e","approved":"yes"}`))
	f.Add(uint8(10), []byte(`{"files":{"/etc/passwd":"x","a.yaml":"tasks: [}"}}`))
	f.Add(uint8(4), []byte(`{"status":["running","failed"],"limit":1e9,"cursor":"\u0000"}`))
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		if !json.Valid(args) {
			return // the transport's JSON is the SDK's; arguments are what is fuzzed
		}
		name := tools[int(tool)%len(tools)]
		if name == "execute_task" && asksToWait(args) {
			return // a wait is up to a minute by design; TestMCPExecuteTaskWaits... covers it
		}
		// The fuzzer has no per-input timeout: a stuck call crashes the
		// worker (keeping the input) rather than stalling the run.
		defer watchdog(30*time.Second, name, args)()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		res, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if ctx.Err() != nil {
			t.Fatalf("%s(%s) did not answer in time", name, args)
		}
		if err == nil && res == nil {
			t.Fatalf("%s(%s): no result and no error", name, args)
		}
		if err != nil && strings.Contains(err.Error(), "internal") {
			t.Fatalf("%s(%s): %v", name, args, err)
		}
		if res != nil && res.IsError && strings.Contains(text(res), "internal server error") {
			t.Fatalf("%s(%s): %s", name, args, text(res))
		}
		if _, err := m.cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("the server stopped answering after %s(%s): %v", name, args, err)
		}
	})
}

// asksToWait reports whether tool arguments hold a wait_seconds the way
// the server decodes them (an escaped or differently cased key
// included), not merely the text "wait_seconds".
func asksToWait(args []byte) bool {
	var in map[string]json.RawMessage
	if json.Unmarshal(args, &in) != nil {
		return false
	}
	for k := range in {
		if strings.EqualFold(k, "wait_seconds") {
			return true
		}
	}
	return false
}

// A job that ends before execute_task's wait subscribes to its feed (every
// step skipped: no worker is involved) still tells a client that asked
// for progress how it ended.
func TestMCPExecuteTaskTellsTheEndOfAJobThatEndedAtOnce(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "quick")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"),
		"tasks:\n  noop:\n    flow:\n      never:\n        when: \"{{ false }}\"\n        type: script\n        script: echo never\n", 0o644)
	m := startAPI(t, tmp, map[string]string{"quick": dir}).mcp(t, "")
	params := &mcp.CallToolParams{Name: "execute_task", Arguments: map[string]any{"workspace": "quick", "task": "noop", "wait_seconds": 30}}
	params.SetProgressToken("quick-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := m.cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("execute_task: %v %v", err, res)
	}
	out := res.StructuredContent.(map[string]any)
	if out["ended"] != true {
		t.Fatalf("execute_task answered %v, want the ended job", out)
	}
	// The SDK hands notifications to their handler from a queue: the
	// last may come after the answer.
	end := "job: " + out["status"].(string)
	eventually(t, "a progress notification of the job's end", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return len(m.progress) > 0 && m.progress[len(m.progress)-1] == end
	})
}
