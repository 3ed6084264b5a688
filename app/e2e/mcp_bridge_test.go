package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/wire"
)

// TestMCPStdioBridgeForwardsToTheServer drives `appliance mcp` as a
// desktop assistant does: a subprocess speaking MCP on stdin and stdout,
// forwarding to a running `appliance serve`. The tools are the server's;
// a run waits for its job and passes the progress notifications back.
func TestMCPStdioBridgeForwardsToTheServer(t *testing.T) {
	srv := startBinaryServer(t, `
tasks:
  greet:
    input:
      name: {type: string, required: true}
    flow:
      say:
        type: script
        script: 'sleep 1; echo "OUTPUT: {\"greeting\": \"hi $INPUT_NAME\"}"'
`, 1)
	cmd := exec.Command(srv.bin, "mcp", "--server", "http://"+srv.addr)
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(), "APPLIANCE_TOKEN=")
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop-assistant", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("start appliance mcp: %v", err)
	}
	defer cs.Close()

	names := toolNames(ctx, t, cs)
	if len(names) != 12 || !slices.Contains(names, "execute_task") {
		t.Fatalf("the bridge lists %v, want the server's 12 tools", names)
	}
	params := &mcp.CallToolParams{Name: "execute_task", Arguments: map[string]any{
		"workspace": "ws", "task": "greet", "input": map[string]any{"name": "ada"}, "wait_seconds": 60}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("execute_task through the bridge: %v %v", err, res)
	}
	out := res.StructuredContent.(map[string]any)
	if out["status"] != "completed" {
		t.Fatalf("execute_task answered %v", out)
	}
	if greeting := out["output"].(map[string]any)["say"].(map[string]any)["greeting"]; greeting != "hi ada" {
		t.Fatalf("job output %v", out["output"])
	}
	// The SDK hands notifications to their handler from a queue: the
	// last may come after the answer.
	waitUntil(t, "the steps' progress through the bridge", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(progress, func(s string) bool { return strings.Contains(s, "step say") }) &&
			progress[len(progress)-1] == "job: completed"
	})
	// A refusal comes back as the server's message.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": "0195c3a0-0000-7000-8000-000000000000"}})
	if err != nil || !res.IsError {
		t.Fatalf("get_job of no job through the bridge: %v %v", err, res)
	}
}

// toolNames lists the tools a session may call, sorted.
func toolNames(ctx context.Context, t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// bridge starts `appliance mcp` against an auth-on server with the client
// commands' config dir and extra environment (APPLIANCE_TOKEN unset
// unless env sets it), as an assistant's MCP configuration does.
func (s *authServer) bridge(ctx context.Context, env ...string) *mcp.ClientSession {
	s.t.Helper()
	cmd := exec.Command(binary(s.t), "mcp", "--server", s.url)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "APPLIANCE_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "XDG_CONFIG_HOME="+s.config), env...)
	client := mcp.NewClient(&mcp.Implementation{Name: "desktop-assistant", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		s.t.Fatalf("start appliance mcp: %v", err)
	}
	s.t.Cleanup(func() { cs.Close() })
	return cs
}

// With auth on, the bridge acts with APPLIANCE_TOKEN: an API key limited
// to read and run lists only the tools those scopes allow, can run a
// task, and has no tool beyond them (decide_approval needs approve).
func TestMCPStdioBridgeWithAnAPIKeyInAPPLIANCE_TOKEN(t *testing.T) {
	s := startAuthServer(t)
	admin := loginToken(t, s.url, "first-password")
	var created wire.APIKeyCreated
	if code := doAuthBody(t, "POST", s.url+"/api/auth/api-keys", admin, map[string]any{"name": "assistant", "scopes": []string{"read", "run"}}, &created); code != 201 && code != 200 {
		t.Fatalf("create api key: %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := s.bridge(ctx, "APPLIANCE_TOKEN="+created.Key)

	want := api.ToolsFor([]accounts.Scope{accounts.ScopeRead, accounts.ScopeRun})
	slices.Sort(want)
	got := toolNames(ctx, t, cs)
	if !slices.Equal(got, want) || slices.Contains(got, "decide_approval") || !slices.Contains(got, "execute_task") {
		t.Fatalf("the bridge with a read+run key lists %v, want %v", got, want)
	}
	if all := api.ToolsFor(nil); len(got) >= len(all) {
		t.Fatalf("a read+run key sees %d of %d tools: the scopes do not narrow the list", len(got), len(all))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_task", Arguments: map[string]any{"workspace": "main", "task": "hello", "wait_seconds": 60}})
	if err != nil || res.IsError {
		t.Fatalf("execute_task with the key: %v %v", err, res)
	}
	if out := res.StructuredContent.(map[string]any); out["status"] != "completed" {
		t.Fatalf("execute_task with the key answered %v", out)
	}
	decide := &mcp.CallToolParams{Name: "decide_approval", Arguments: map[string]any{
		"job_id": "0195c3a0-0000-7000-8000-000000000000", "step": "gate", "approved": true}}
	res, err = cs.CallTool(ctx, decide)
	if err == nil && !res.IsError {
		t.Fatalf("decide_approval beyond the key's scopes answered %v", res.StructuredContent)
	}
	msg := fmt.Sprint(err)
	if res != nil {
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				msg += tc.Text
			}
		}
	}
	// The bridge serves only the tools the key allows: the others do not
	// exist for it.
	if !strings.Contains(msg, `unknown tool "decide_approval"`) {
		t.Fatalf("decide_approval beyond the key's scopes: %q, want an unknown tool", msg)
	}
}

// Without APPLIANCE_TOKEN the bridge uses the login `appliance login`
// stored, which sees every tool (an admin's session has no scopes).
func TestMCPStdioBridgeWithTheStoredLogin(t *testing.T) {
	s := startAuthServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s.login()
	cs := s.bridge(ctx)
	want := api.ToolsFor(nil)
	slices.Sort(want)
	if got := toolNames(ctx, t, cs); !slices.Equal(got, want) {
		t.Fatalf("the bridge with the stored login lists %v, want %v", got, want)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_workers", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_workers with the stored login: %v %v", err, res)
	}
}
