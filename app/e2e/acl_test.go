package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/app/config"
)

// doAs calls the API with a bearer token and a JSON body; the answer is
// checked against the OpenAPI document like every other.
func doAs(t *testing.T, method, url, token string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer(t, req, resp, raw); err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: status %d, body %q: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// The acl section of the server config reaches the API: an admin creates
// a user in a group the ACL lets view ops/* tasks, and that user sees
// those and nothing else.
func TestServerEnforcesTheConfiguredACL(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, `tasks:
  deploy:
    folder: ops
    flow:
      s: {type: script, script: echo deploy}
  secret:
    flow:
      s: {type: script, script: echo secret}
`)
	f := startFixture(t, map[string]string{"main": ws}, 0, withAuth, func(c *config.Server) {
		// acl: {default: deny, rules: [{workspace: main, tasks: ["ops/*"], action: view, groups: [devs]}]}
		c.ACL = &config.ACL{Rules: []config.ACLRule{{
			Workspace: "main", Tasks: []string{"ops/*"}, Action: config.ACLAction{Action: accounts.View, Set: true}, Groups: []string{"devs"},
		}}}
		var err error
		if c.Effective.ACL, err = c.ACL.Build(c.Auth); err != nil {
			t.Fatal(err)
		}
	})
	admin := loginToken(t, f.url, "first-password")
	if code := doAs(t, "POST", f.url+"/api/users", admin, map[string]any{
		"email": "dev@example.com", "password": "a long dev password", "groups": []string{"devs"},
	}, nil); code != 201 {
		t.Fatalf("create user: %d", code)
	}
	for _, task := range []string{"deploy", "secret"} {
		if code := doAs(t, "POST", f.url+"/api/workspaces/main/tasks/"+task+"/execute", admin, map[string]any{"input": map[string]any{}}, nil); code != 200 {
			t.Fatalf("admin execute %s: %d", task, code)
		}
	}
	var tokens wire.TokenPair
	if code := do(t, "POST", f.url+"/api/auth/login", wire.LoginRequest{Email: "dev@example.com", Password: "a long dev password"}, &tokens); code != 200 {
		t.Fatalf("dev login: %d", code)
	}
	dev := tokens.AccessToken

	var cfg map[string]any
	if do(t, "GET", f.url+"/api/config", nil, &cfg); cfg["acl_enabled"] != true {
		t.Fatalf("config: %v", cfg)
	}
	var jobs struct {
		Items []struct {
			TaskName string `json:"task_name"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if code := doAs(t, "GET", f.url+"/api/jobs", dev, nil, &jobs); code != 200 || jobs.Total != 1 || len(jobs.Items) != 1 || jobs.Items[0].TaskName != "deploy" {
		t.Fatalf("dev jobs: %d %+v", code, jobs)
	}
	if code := doAs(t, "POST", f.url+"/api/workspaces/main/tasks/deploy/execute", dev, map[string]any{"input": map[string]any{}}, nil); code != 403 {
		t.Fatalf("dev executes a task they may view: %d, want 403", code)
	}
	if code := doAs(t, "GET", f.url+"/api/workspaces/main/tasks/secret", dev, nil, nil); code != 404 {
		t.Fatalf("dev reads a denied task: %d, want 404", code)
	}
	if code := doAs(t, "GET", f.url+"/api/jobs", admin, nil, &jobs); code != 200 || jobs.Total != 2 {
		t.Fatalf("admin jobs: %d %+v", code, jobs)
	}
}
