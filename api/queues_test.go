package api_test

import (
	"path/filepath"
	"strings"
	"testing"
)

const queuesWorkflow = `
tasks:
  deploy:
    input:
      env: {type: string, required: true}
      priority: {type: integer, default: 0}
    queue: deploys
    concurrency: {limit: 1, key: "{{ input.env }}", priority: "{{ input.priority }}"}
    flow:
      ship: {type: script, script: echo ship}
`

func newQueuesFixture(t *testing.T) *fixture {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "main")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), queuesWorkflow, 0o644)
	return startAPI(t, tmp, map[string]string{"main": dir}, func(c *fixtureConfig) {
		c.engine.Queues = map[string]int{"deploys": 2}
	})
}

func (f *fixture) deploy(env string, priority int) string {
	f.t.Helper()
	m := f.api("POST", "/api/workspaces/main/tasks/deploy/execute",
		map[string]any{"input": map[string]any{"env": env, "priority": priority}}).expect(200).object()
	return m["job_id"].(string)
}

func TestAQueuedJobShowsItsPlaceInTheDetailTheListsAndTheQueues(t *testing.T) {
	f := newQueuesFixture(t)
	first := f.deploy("prod", 0)
	second := f.deploy("prod", 0)
	urgent := f.deploy("prod", 50)

	detail := f.api("GET", "/api/jobs/"+first, nil).expect(200).object()
	if detail["queue"] != nil {
		t.Fatalf("a running job shows queue %v, want null", detail["queue"])
	}
	q, _ := f.api("GET", "/api/jobs/"+second, nil).expect(200).object()["queue"].(map[string]any)
	if q == nil || q["name"] != "deploys" || q["key"] != "prod" || q["position"] != 2.0 || q["priority"] != 0.0 || q["since"] == nil {
		t.Fatalf("queued job's queue = %v, want deploys/prod at position 2", q)
	}

	list := f.api("GET", "/api/jobs?queued=true", nil).expect(200).object()
	items := list["items"].([]any)
	if list["total"] != 2.0 || len(items) != 2 || items[0].(map[string]any)["job_id"] != urgent || items[1].(map[string]any)["job_id"] != second {
		t.Fatalf("queued list = %v, want urgent then second", list)
	}
	f.api("GET", "/api/jobs?queued=maybe", nil).expectError(400, "queued: want true or false")

	queues := f.api("GET", "/api/queues", nil).expect(200).object()["queues"].([]any)
	var named, keyed map[string]any
	for _, v := range queues {
		m := v.(map[string]any)
		if m["name"] == "deploys" {
			named = m
		} else if m["task_name"] == "deploy" && m["key"] == "prod" {
			keyed = m
		}
	}
	if named == nil || named["limit"] != 2.0 || len(named["running"].([]any)) != 1 || len(named["queued"].([]any)) != 2 {
		t.Fatalf("queue deploys = %v, want limit 2, one running, two queued", named)
	}
	if keyed == nil || keyed["limit"] != 1.0 || keyed["running"].([]any)[0].(map[string]any)["job_id"] != first {
		t.Fatalf("task limit for prod = %v, want the first job running", keyed)
	}

	// Moved to the front, then cancelled while queued.
	moved := f.api("POST", "/api/jobs/"+second+"/priority", map[string]any{"priority": 99}).expect(200).object()
	if mq, _ := moved["queue"].(map[string]any); mq == nil || mq["position"] != 1.0 || mq["priority"] != 99.0 {
		t.Fatalf("after the priority change: %v, want position 1", moved)
	}
	f.api("POST", "/api/jobs/"+second+"/priority", map[string]any{"priority": 101}).expectError(400, "out of range")
	f.api("POST", "/api/jobs/"+second+"/priority", map[string]any{}).expectError(400, "priority: required")
	f.api("POST", "/api/jobs/"+first+"/priority", map[string]any{"priority": 1}).expectError(409, "not queued")
	f.api("POST", "/api/jobs/"+second+"/cancel", nil).expect(200)
	if s := f.jobStatus(second); s != "cancelled" {
		t.Fatalf("cancelled queued job is %s", s)
	}
	if q, _ := f.api("GET", "/api/jobs/"+urgent, nil).expect(200).object()["queue"].(map[string]any); q == nil || q["position"] != 1.0 {
		t.Fatalf("after the cancel the urgent job is at %v, want 1", q)
	}

	// The first job ends: the urgent one starts.
	w := f.register("w1")
	f.runStep(w, first, "ship", nil)
	eventually(t, "the next in line starts", func() bool {
		return f.api("GET", "/api/jobs/"+urgent, nil).expect(200).object()["queue"] == nil
	})
}

func TestABadConcurrencyKeyOrPriorityIsA400NamingTheField(t *testing.T) {
	f := newQueuesFixture(t)
	r := f.api("POST", "/api/workspaces/main/tasks/deploy/execute", map[string]any{"input": map[string]any{"env": "prod", "priority": 500}})
	r.expectError(400, "concurrency.priority: priority 500 is out of range")
	r = f.api("POST", "/api/workspaces/main/tasks/deploy/execute", map[string]any{"input": map[string]any{"env": strings.Repeat("x", 201)}})
	r.expectError(400, "concurrency.key")
}

func TestOnlyAnAdminMayChangeAQueuedJobsPriority(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("dev@example.com", "a-long-password-1", false)
	f.addUser("ops@example.com", "a-long-password-2", true)
	dev, _ := f.login("dev@example.com", "a-long-password-1")
	ops, _ := f.login("ops@example.com", "a-long-password-2")
	job := f.as(dev, "POST", "/api/workspaces/main/tasks/other/execute", map[string]any{}).expect(200).object()["job_id"].(string)
	f.as(dev, "POST", "/api/jobs/"+job+"/priority", map[string]any{"priority": 5}).expectError(403, "only an admin")
	// An admin passes the check; the job does not wait, so it is a 409.
	f.as(ops, "POST", "/api/jobs/"+job+"/priority", map[string]any{"priority": 5}).expectError(409, "not queued")
	if qs := f.as(dev, "GET", "/api/queues", nil).expect(200).object()["queues"].([]any); len(qs) != 0 {
		t.Fatalf("queues with none configured and none in use: %v", qs)
	}
}

// GET /api/queues shows each caller only the jobs they may view: a
// named queue is listed to all, with the visible jobs only.
func TestQueuesListOnlyVisibleJobs(t *testing.T) {
	f := newACLFixture(t, func(c *fixtureConfig) { c.engine.Queues = map[string]int{"shared": 1} })
	src := strings.Replace(strings.Replace(mainWorkflow, "  other:\n    flow:", "  other:\n    queue: shared\n    flow:", 1),
		"    folder: demo/greetings\n", "    folder: demo/greetings\n    queue: shared\n", 1)
	writeFile(t, filepath.Join(f.wsDir, ".workflows", "main.yaml"), src, 0o644)
	admin := f.tokens[roleAdmin]
	sharedOf := func(tok string) map[string]any {
		for _, q := range f.as(tok, "GET", "/api/queues", nil).expect(200).object()["queues"].([]any) {
			if m := q.(map[string]any); m["name"] == "shared" {
				return m
			}
		}
		t.Fatal("queue shared is not listed")
		return nil
	}
	var first string
	eventually(t, "the reloaded workspace puts hello in the shared queue", func() bool {
		first = f.run("hello")
		return len(sharedOf(admin)["running"].([]any)) == 1
	})
	other := f.run("other")
	second := f.run("hello")
	ids := func(list any) []string {
		var out []string
		for _, j := range list.([]any) {
			out = append(out, j.(map[string]any)["job_id"].(string))
		}
		return out
	}
	cases := []struct {
		role            int
		running, queued string
	}{
		{roleAdmin, first, other + " " + second},
		{roleRun, first, other + " " + second},
		{roleView, first, second},
		{roleDeny, "", ""},
	}
	for _, c := range cases {
		q := sharedOf(f.tokens[c.role])
		if r, w := strings.Join(ids(q["running"]), " "), strings.Join(ids(q["queued"]), " "); r != c.running || w != c.queued {
			t.Errorf("%s sees running [%s] queued [%s], want [%s] [%s]", roleNames[c.role], r, w, c.running, c.queued)
		}
	}
}
