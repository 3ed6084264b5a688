package e2e

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
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
	mu.Lock()
	if !slices.ContainsFunc(progress, func(s string) bool { return strings.Contains(s, "step say") }) {
		t.Errorf("progress through the bridge: %v", progress)
	}
	mu.Unlock()
	// A refusal comes back as the server's message.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_job", Arguments: map[string]any{"job_id": "0195c3a0-0000-7000-8000-000000000000"}})
	if err != nil || !res.IsError {
		t.Fatalf("get_job of no job through the bridge: %v %v", err, res)
	}
}
