package api_test

import (
	"strings"
	"testing"
)

func TestConfigReportsAuthOffAndVersion(t *testing.T) {
	f := newFixture(t)
	m := f.api("GET", "/api/config", nil).expect(200).object()
	assertKeys(t, "config", m, "auth_required", "has_internal_auth", "oidc_providers", "acl_enabled", "version")
	if m["auth_required"] != false || m["has_internal_auth"] != false || m["acl_enabled"] != false || m["version"] != "1.2.3-test" {
		t.Fatalf("config = %v", m)
	}
	if p, ok := m["oidc_providers"].([]any); !ok || len(p) != 0 {
		t.Fatalf("oidc_providers = %v, want []", m["oidc_providers"])
	}
	if h := f.api("GET", "/healthz", nil).expect(200).object(); h["status"] != "ok" {
		t.Fatalf("healthz = %v", h)
	}
}

func TestWorkspaceListShowsCountsAndLoadErrors(t *testing.T) {
	f := newFixture(t)
	items := f.api("GET", "/api/workspaces", nil).expect(200).array()
	if len(items) != 2 {
		t.Fatalf("got %d workspaces, want 2: %v", len(items), items)
	}
	byName := map[string]map[string]any{}
	for _, it := range items {
		byName[it["name"].(string)] = it
	}
	main := byName["main"]
	assertKeys(t, "workspace item", main, "name", "tasks_count", "actions_count", "triggers_count", "revision")
	if main["tasks_count"] != 2.0 || main["actions_count"] != 1.0 || main["triggers_count"] != 3.0 || main["revision"] == "" {
		t.Fatalf("main = %v", main)
	}
	broken := byName["broken"]
	assertKeys(t, "broken workspace item", broken, "name", "tasks_count", "actions_count", "triggers_count", "revision", "errors")
	if broken["tasks_count"] != 0.0 || broken["revision"] != "" {
		t.Fatalf("a workspace that never loaded should show no counts and no revision: %v", broken)
	}
	errs, _ := broken["errors"].([]any)
	if len(errs) == 0 || !strings.Contains(errs[0].(string), "missing") {
		t.Fatalf("broken errors = %v, want the unknown action named", broken["errors"])
	}
}

func TestTaskListIsSortedWithFolderOnlyWhenSet(t *testing.T) {
	f := newFixture(t)
	items := f.api("GET", "/api/workspaces/main/tasks", nil).expect(200).array()
	if len(items) != 2 || items[0]["name"] != "hello" || items[1]["name"] != "other" {
		t.Fatalf("tasks = %v, want hello then other", items)
	}
	// The description is there for lists to show; a task without a
	// display name (`name:`) has no display_name.
	assertKeys(t, "hello summary", items[0], "name", "workspace", "mode", "has_triggers", "folder", "description")
	if items[0]["workspace"] != "main" || items[0]["mode"] != "distributed" || items[0]["has_triggers"] != true || items[0]["folder"] != "demo/greetings" ||
		items[0]["description"] != "Say hello" {
		t.Fatalf("hello = %v", items[0])
	}
	// other's only trigger is disabled, and it has no folder.
	assertKeys(t, "other summary", items[1], "name", "workspace", "mode", "has_triggers")
	if items[1]["has_triggers"] != false {
		t.Fatalf("other = %v, want has_triggers false", items[1])
	}
	if got := f.api("GET", "/api/workspaces/broken/tasks", nil).expect(200).array(); len(got) != 0 {
		t.Fatalf("a workspace with no good revision lists tasks %v", got)
	}
	f.api("GET", "/api/workspaces/nope/tasks", nil).expectError(404, `workspace "nope"`)
}

func TestTaskDetailShowsInputFlowAndTriggersWithoutSecrets(t *testing.T) {
	f := newFixture(t)
	m := f.api("GET", "/api/workspaces/main/tasks/hello", nil).expect(200).object()
	assertKeys(t, "task detail", m, "name", "description", "folder", "mode", "input", "flow", "triggers")
	if m["name"] != "hello" || m["description"] != "Say hello" || m["mode"] != "distributed" {
		t.Fatalf("task = %v", m)
	}
	input := m["input"].(map[string]any)
	assertKeys(t, "task input", input, "name", "times")
	if name := input["name"].(map[string]any); name["type"] != "string" || name["required"] != true {
		t.Fatalf("input.name = %v", name)
	}
	flow := m["flow"].(map[string]any)
	assertKeys(t, "flow", flow, "say", "after")
	if say := flow["say"].(map[string]any); say["action"] != "greet" {
		t.Fatalf("flow.say = %v", say)
	}
	triggers := m["triggers"].([]any)
	if len(triggers) != 2 {
		t.Fatalf("triggers of hello = %v, want incoming and nightly", triggers)
	}
	webhook := triggers[0].(map[string]any)
	if webhook["name"] != "incoming" || webhook["type"] != "webhook" || webhook["webhook_name"] != "incoming-hook" {
		t.Fatalf("webhook trigger = %v", webhook)
	}
	// Steps come in file order (say, then after), not sorted by name.
	raw := string(f.api("GET", "/api/workspaces/main/tasks/hello", nil).body)
	if say, after := strings.Index(raw, `"say":`), strings.Index(raw, `"after":`); say < 0 || after < 0 || say > after {
		t.Errorf("flow steps out of file order: %s", raw)
	}
	if strings.Contains(string(f.api("GET", "/api/workspaces/main/tasks/hello", nil).body), "s3cret") {
		t.Fatal("the task detail leaks a webhook secret")
	}
	nightly := triggers[1].(map[string]any)
	if nightly["name"] != "nightly" || nightly["cron"] != "30 2 * * *" || nightly["task"] != "hello" || nightly["enabled"] != true {
		t.Fatalf("nightly = %v", nightly)
	}
	if in := nightly["input"].(map[string]any); in["name"] != "night" {
		t.Fatalf("nightly input = %v", in)
	}
	// Berlin springs forward on 2025-03-30: 02:30 fires at 03:00 CEST.
	runs := nightly["next_runs"].([]any)
	want := []string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z", "2025-04-01T00:30:00Z", "2025-04-02T00:30:00Z", "2025-04-03T00:30:00Z"}
	if len(runs) != len(want) {
		t.Fatalf("next_runs = %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Fatalf("next_runs = %v, want %v", runs, want)
		}
	}

	f.api("GET", "/api/workspaces/main/tasks/nope", nil).expectError(404, `task "nope"`)
	f.api("GET", "/api/workspaces/nope/tasks/hello", nil).expectError(404, `workspace "nope"`)
}

func TestTriggerListGivesSchedulerTriggersNextRuns(t *testing.T) {
	f := newFixture(t)
	items := f.api("GET", "/api/workspaces/main/triggers", nil).expect(200).array()
	if len(items) != 3 {
		t.Fatalf("triggers = %v", items)
	}
	byName := map[string]map[string]any{}
	for _, it := range items {
		byName[it["name"].(string)] = it
	}
	if runs, _ := byName["nightly"]["next_runs"].([]any); len(runs) != 5 {
		t.Fatalf("nightly next_runs = %v, want 5", byName["nightly"]["next_runs"])
	}
	if runs, ok := byName["paused"]["next_runs"].([]any); !ok || len(runs) != 0 || byName["paused"]["enabled"] != false {
		t.Fatalf("a disabled scheduler trigger should list no runs: %v", byName["paused"])
	}
	if _, ok := byName["incoming"]["next_runs"]; ok {
		t.Fatalf("a webhook has no next_runs: %v", byName["incoming"])
	}
	f.api("GET", "/api/workspaces/nope/triggers", nil).expectError(404, "nope")
}
