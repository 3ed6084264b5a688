package api_test

import (
	"fmt"
	"strings"
	"testing"
)

var jobItemKeys = []string{"job_id", "workspace", "task_name", "mode", "status", "source_type", "source_id", "revision", "created_at", "started_at", "completed_at"}

func TestExecuteCreatesAPIJobWithDefaults(t *testing.T) {
	f := newFixture(t)
	id := f.execute("World")
	// say's input renders off the orchestrator loop: it is pending until then.
	var m map[string]any
	eventually(t, "step say to be ready", func() bool {
		m = f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
		steps, _ := m["steps"].([]any)
		return len(steps) > 0 && steps[0].(map[string]any)["status"] != "pending"
	})
	assertKeys(t, "job detail", m, append(jobItemKeys, "input", "output", "steps", "steps_summary")...)
	if m["job_id"] != id || m["workspace"] != "main" || m["task_name"] != "hello" || m["mode"] != "distributed" ||
		m["source_type"] != "api" || m["source_id"] != nil || m["revision"] == "" || m["output"] != nil {
		t.Fatalf("job = %v", m)
	}
	if s := m["status"]; s != "pending" && s != "running" {
		t.Fatalf("status = %v, want pending or running", s)
	}
	if created, _ := m["created_at"].(string); !strings.HasSuffix(created, "Z") {
		t.Fatalf("created_at = %v, want RFC 3339 UTC", m["created_at"])
	}
	if in := m["input"].(map[string]any); in["name"] != "World" || in["times"] != 1.0 {
		t.Fatalf("input = %v, want the default times filled in", in)
	}
	steps := m["steps"].([]any)
	if len(steps) != 2 {
		t.Fatalf("steps = %v", steps)
	}
	say := steps[0].(map[string]any)
	// Beyond the interface's keys: when it became ready (the UI's queue wait).
	assertKeys(t, "step record", say, "step_name", "action_name", "action_type", "runner", "input", "output", "status", "worker_id", "started_at", "completed_at", "error_message", "attempt", "retry_at", "ready_at")
	if say["step_name"] != "say" || say["action_name"] != "greet" || say["action_type"] != "script" || say["runner"] != "local" || say["status"] != "ready" || say["worker_id"] != nil {
		t.Fatalf("say = %v", say)
	}
	if say["attempt"] != 1.0 || say["retry_at"] != nil {
		t.Fatalf("say attempt = %v, retry_at = %v; want 1 and null", say["attempt"], say["retry_at"])
	}
	if after := steps[1].(map[string]any); after["step_name"] != "after" || after["status"] != "pending" {
		t.Fatalf("after = %v", after)
	}
	// The edges of the graph: each flow step names what it waits for.
	if deps := steps[1].(map[string]any)["depends_on"]; fmt.Sprint(deps) != "[say]" {
		t.Fatalf("after.depends_on = %v, want [say]", deps)
	}
	if deps, ok := say["depends_on"]; ok {
		t.Fatalf("say.depends_on = %v, want it absent", deps)
	}
}

func TestExecuteRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	exec := "/api/workspaces/main/tasks/hello/execute"
	tests := []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"missing required input names the field", map[string]any{"input": map[string]any{}}, 400, "name"},
		{"empty body is empty input", "", 400, "name"},
		{"malformed JSON", `{"input": {`, 400, "malformed JSON"},
		{"input that is not an object", `{"input": 5}`, 400, "input"},
		{"body that is not an object", `[1, 2]`, 400, "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).api("POST", exec, tt.body).expectError(tt.status, tt.want)
		})
	}
	f.api("POST", "/api/workspaces/main/tasks/nope/execute", map[string]any{}).expectError(404, `task "nope"`)
	f.api("POST", "/api/workspaces/nope/tasks/hello/execute", map[string]any{}).expectError(404, `workspace "nope"`)
	if got := f.api("GET", "/api/jobs", nil).expect(200).object()["total"]; got != 0.0 {
		t.Fatalf("rejected requests created %v jobs", got)
	}
}

func TestJobListPagesNewestFirstAndFilters(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 3 {
		ids = append(ids, f.execute(fmt.Sprint("n", i)))
	}
	other := f.api("POST", "/api/workspaces/main/tasks/other/execute", nil).expect(200).object()["job_id"]

	all := f.api("GET", "/api/jobs", nil).expect(200).object()
	assertKeys(t, "job list", all, "items", "total", "next_cursor")
	items := all["items"].([]any)
	if all["total"] != 4.0 || len(items) != 4 || items[0].(map[string]any)["job_id"] != other {
		t.Fatalf("jobs = %v, want 4, newest (other) first", all)
	}
	assertKeys(t, "job list item", items[0].(map[string]any), jobItemKeys...)

	pageTwo := f.api("GET", "/api/jobs?workspace=main&task_name=hello&limit=2&offset=2", nil).expect(200).object()
	got := pageTwo["items"].([]any)
	if pageTwo["total"] != 3.0 || len(got) != 1 || got[0].(map[string]any)["job_id"] != ids[0] {
		t.Fatalf("second page of hello = %v, want only the oldest hello job", pageTwo)
	}
	if capped := f.api("GET", "/api/jobs?limit=100000", nil).expect(200).object(); len(capped["items"].([]any)) != 4 {
		t.Fatalf("a huge limit is capped, not refused: %v", capped)
	}

	for _, q := range []string{"limit=abc", "limit=0", "limit=-1", "offset=-1", "offset=x"} {
		f.api("GET", "/api/jobs?"+q, nil).expectError(400, strings.Split(q, "=")[0])
	}
	f.api("GET", "/api/jobs?task_name=hello", nil).expectError(400, "task_name requires workspace")
}

func TestUnknownJobsAndStepsAre404(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x")
	missing := "00000000-0000-4000-8000-000000000000"
	for _, path := range []string{
		"/api/jobs/" + missing,
		"/api/jobs/not-a-uuid",
		"/api/jobs/" + missing + "/logs",
		"/api/jobs/" + missing + "/steps/say/logs",
		"/api/jobs/" + id + "/steps/nope/logs",
		"/api/jobs/" + missing + "/logs/stream",
		"/api/workers/" + missing,
		"/api/nothing-here",
	} {
		f.api("GET", path, nil).expect(404).errorMessage()
	}
	f.api("POST", "/api/jobs/"+missing+"/cancel", nil).expect(404).errorMessage()
	f.api("DELETE", "/api/jobs/"+id, nil).expect(405).errorMessage()
}

func TestCancelJobThenCancelAgainConflicts(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x")
	m := f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200).object()
	assertKeys(t, "cancel", m, "status")
	if m["status"] != "cancelled" {
		t.Fatalf("cancel = %v", m)
	}
	if s := f.jobStatus(id); s != "cancelled" {
		t.Fatalf("status after cancel = %s", s)
	}
	f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(409).errorMessage()
}

func TestJobAndStepLogsReadTheJSONL(t *testing.T) {
	f := newFixture(t)
	id := f.execute("x") // before any worker: the engine notes it under _server
	w := f.register("w1")
	f.claimStep(w, id, "say")
	f.pushLogs(w, id, "say", "first", "second")

	all := f.api("GET", "/api/jobs/"+id+"/logs", nil).expect(200).object()
	assertKeys(t, "logs", all, "logs", "lines", "next")
	say := f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string)
	server := f.api("GET", "/api/jobs/"+id+"/steps/_server/logs", nil).expect(200).object()["logs"].(string)
	sayLines := strings.Split(strings.TrimSpace(say), "\n")
	if len(sayLines) != 2 || !strings.Contains(sayLines[0], `"line":"first"`) || !strings.Contains(sayLines[1], `"line":"second"`) {
		t.Fatalf("say logs = %q", say)
	}
	for _, l := range strings.Split(strings.TrimSpace(server), "\n") {
		if l != "" && !strings.Contains(l, `"step":"_server"`) {
			t.Fatalf("_server logs hold another step's line: %q", l)
		}
	}
	if len(all["logs"].(string)) != len(say)+len(server) || !strings.Contains(all["logs"].(string), say) {
		t.Fatalf("job logs = %q, want the say and _server lines together", all["logs"])
	}
	if other := f.api("GET", "/api/jobs/"+id+"/steps/after/logs", nil).expect(200).object()["logs"]; other != "" {
		t.Fatalf("after logs = %q, want none", other)
	}
}

func TestBodyOverTheLimitIs413(t *testing.T) {
	f := newFixture(t)
	big := `{"input": {"name": "` + strings.Repeat("x", 11<<20) + `"}}`
	f.api("POST", "/api/workspaces/main/tasks/hello/execute", big).expectError(413, "too large")
}
