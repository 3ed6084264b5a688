package api_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/accounts"
)

// setWorkflow replaces main's workflow file and waits for the hot reload
// to publish it: until the admin sees ready say so.
func (f *aclFixture) setWorkflow(yaml string, ready func() bool) {
	f.t.Helper()
	writeFile(f.t, filepath.Join(f.wsDir, ".workflows", "main.yaml"), yaml, 0o644)
	eventually(f.t.(*testing.T), "the workspace to reload", ready)
}

// withTasks is main's workflow with more tasks.
func withTasks(tasks string) string {
	return strings.Replace(mainWorkflow, "\ntasks:\n", "\ntasks:\n"+tasks, 1)
}

// taskFolder is a task's folder as the admin sees it, or "-" for no task.
func (f *aclFixture) taskFolder(task string) string {
	r := f.as(f.tokens[roleAdmin], "GET", "/api/workspaces/main/tasks/"+task, nil)
	if r.status != http.StatusOK {
		return "-"
	}
	folder, _ := r.object()["folder"].(string)
	return folder
}

// jobStatus is a job's status as the admin sees it.
func (f *aclFixture) jobStatus(job string) string {
	f.t.Helper()
	return f.as(f.tokens[roleAdmin], "GET", "/api/jobs/"+job, nil).expect(200).object()["status"].(string)
}

// jobTotal is the total of a job list as a role sees it.
func (f *aclFixture) jobTotal(role int, query string) int {
	f.t.Helper()
	return int(f.as(f.tokens[role], "GET", "/api/jobs?"+query, nil).expect(200).object()["total"].(float64))
}

// assertHidden checks that every route about the job answers the role as
// for a job that does not exist: detail, steps, logs, log stream, event
// feed, cancel, rerun.
func (f *aclFixture) assertHidden(role int, job, why string) {
	f.t.Helper()
	tok := f.tokens[role]
	for _, path := range []string{"", "/steps", "/logs", "/steps/only/logs", "/logs/stream"} {
		f.as(tok, "GET", "/api/jobs/"+job+path, nil).expectError(http.StatusNotFound, "job")
	}
	f.do("GET", "/api/events?job_id="+job+"&token="+tok, nil, map[string]string{"Accept": "text/event-stream"}).expectError(http.StatusNotFound, "job")
	f.as(tok, "POST", "/api/jobs/"+job+"/rerun", map[string]any{}).expectError(http.StatusNotFound, "job")
	f.as(tok, "POST", "/api/jobs/"+job+"/cancel", nil).expectError(http.StatusNotFound, "job")
	f.as(tok, "POST", "/api/jobs/"+job+"/steps/only/approve", map[string]any{"approved": true}).expectError(http.StatusNotFound, "job")
	for _, it := range f.as(tok, "GET", "/api/jobs?limit=200", nil).expect(200).object()["items"].([]any) {
		if it.(map[string]any)["job_id"] == job {
			f.t.Errorf("%s: job %s is listed to %s", why, job, roleNames[role])
		}
	}
}

// A job keeps the ACL of what it was created for: after a hot reload moves
// its task out of a hidden folder, or removes it, its jobs (input, output,
// logs) stay hidden from a user who could not see the task, and the list
// totals do not count them; jobs created after the move follow the new
// path.
func TestJobsOfAMovedOrRemovedTaskStayHidden(t *testing.T) {
	// Viewers see everything but the vault folder.
	acl := &accounts.ACL{Default: accounts.View, Rules: []accounts.ACLRule{
		{Workspace: "*", Tasks: []string{"vault/*"}, Action: accounts.Deny, Groups: []string{"viewers"}},
	}}
	f := newACLFixture(t, func(c *fixtureConfig) { c.ACL = acl })
	rotate := `
  rotate:
    %s
    flow:
      only: {type: script, script: "echo rotated"}
`
	purge := `
  purge:
    folder: vault
    flow:
      only: {type: script, script: "echo purged"}
`
	f.setWorkflow(withTasks(fmt.Sprintf(rotate, "folder: vault")+purge), func() bool { return f.taskFolder("purge") == "vault" })
	admin := f.tokens[roleAdmin]
	w := f.register("w")
	var jobs []string
	for _, task := range []string{"rotate", "purge"} {
		id := f.as(admin, "POST", "/api/workspaces/main/tasks/"+task+"/execute",
			map[string]any{"input": map[string]any{}}).expect(200).object()["job_id"].(string)
		f.claimStep(w, id, "only")
		f.worker("POST", "/worker/jobs/"+id+"/steps/only/start", map[string]any{"worker_id": w}).expect(200)
		f.pushLogs(w, id, "only", "vault line of "+task)
		f.worker("POST", "/worker/jobs/"+id+"/steps/only/complete", map[string]any{
			"worker_id": w, "output": map[string]any{"said": "vault output"}, "exit_code": 0, "error": nil,
		}).expect(200)
		eventually(t, task+" to complete", func() bool { return f.jobStatus(id) == "completed" })
		jobs = append(jobs, id)
	}
	before := f.jobTotal(roleView, "")
	for _, id := range jobs {
		f.assertHidden(roleView, id, "before the reload")
	}

	// rotate leaves the vault, purge is removed.
	f.setWorkflow(withTasks(fmt.Sprintf(rotate, "description: out of the vault")), func() bool { return f.taskFolder("purge") == "-" && f.taskFolder("rotate") == "" })
	for _, id := range jobs {
		f.assertHidden(roleView, id, "after the reload")
		f.as(admin, "GET", "/api/jobs/"+id, nil).expect(200)
	}
	if got := f.jobTotal(roleView, ""); got != before {
		t.Errorf("viewer's job total %d after the reload, %d before", got, before)
	}
	for _, task := range []string{"rotate", "purge"} {
		if got := f.jobTotal(roleView, "workspace=main&task_name="+task); got != 0 {
			t.Errorf("viewer's total of %s jobs: %d, want 0", task, got)
		}
		if got := f.jobTotal(roleAdmin, "workspace=main&task_name="+task); got != 1 {
			t.Errorf("admin's total of %s jobs: %d, want 1", task, got)
		}
	}
	// A job of rotate where it is now is the viewer's to see.
	id := f.as(admin, "POST", "/api/workspaces/main/tasks/rotate/execute",
		map[string]any{"input": map[string]any{}}).expect(200).object()["job_id"].(string)
	f.as(f.tokens[roleView], "GET", "/api/jobs/"+id, nil).expect(200)
	if got := f.jobTotal(roleView, "workspace=main&task_name=rotate"); got != 1 {
		t.Errorf("viewer's total of rotate jobs after a new one: %d, want 1", got)
	}
}

// The attack: a hook job of a hidden task, whose action is named
// like a task the user may view, carries the hidden job's data (here its
// error); it is judged as the job that fired it, so the user cannot read
// it, find it in a list or count it.
func TestAHookJobIsHiddenWithTheJobThatFiredIt(t *testing.T) {
	f := newACLFixture(t) // the viewer sees demo/* (hello), not other
	yaml := strings.Replace(withTasks(`
  leaky:
    flow:
      only: {type: script, script: "false"}
    on_error:
      - action: hello
        input: {about: "{{ hook.error_message }}"}
`), "\nactions:\n", `
actions:
  hello:
    type: script
    input:
      about: {type: string}
    script: echo "{{ input.about }}"
`, 1)
	f.setWorkflow(yaml, func() bool { return f.taskFolder("leaky") == "" })
	admin, viewer := f.tokens[roleAdmin], f.tokens[roleView]
	before := f.jobTotal(roleView, "")
	job := f.as(admin, "POST", "/api/workspaces/main/tasks/leaky/execute",
		map[string]any{"input": map[string]any{}}).expect(200).object()["job_id"].(string)
	w := f.register("w")
	f.endStep(w, job, "only", map[string]any{}, 1, "token=hidden-job-secret")
	var hook string
	eventually(t, "the hook job", func() bool {
		for _, it := range f.as(admin, "GET", "/api/jobs?source_type=hook", nil).expect(200).object()["items"].([]any) {
			if m := it.(map[string]any); m["source_id"] == job {
				hook = m["job_id"].(string)
			}
		}
		return hook != ""
	})
	detail := f.as(admin, "GET", "/api/jobs/"+hook, nil).expect(200).object()
	if detail["task_name"] != "hello" || !strings.Contains(detail["input"].(map[string]any)["about"].(string), "hidden-job-secret") {
		t.Fatalf("hook job %v, want task hello carrying the hidden job's error", detail)
	}
	f.assertHidden(roleView, job, "the hidden job")
	f.assertHidden(roleView, hook, "its hook job")
	for _, q := range []string{"", "workspace=main&task_name=hello", "source_type=hook", "status=pending,running,completed,failed"} {
		for _, it := range f.as(viewer, "GET", "/api/jobs?"+q, nil).expect(200).object()["items"].([]any) {
			if it.(map[string]any)["job_id"] == hook {
				t.Errorf("list %q shows the hook job", q)
			}
		}
	}
	if got := f.jobTotal(roleView, ""); got != before {
		t.Errorf("viewer's job total went from %d to %d", before, got)
	}
	// A user who may view the firing task may view its hook job.
	f.as(f.tokens[roleRun], "GET", "/api/jobs/"+hook, nil).expect(200)
}

// The attack 2: a workspace's load errors quote template source,
// here a literal secret in a hidden task's script. They go in full to
// admins only; a user under the ACL reads the errors of files whose tasks
// they may view, located but without the source.
func TestLoadErrorsShowOnlyWhatTheCallerMayView(t *testing.T) {
	f := newACLFixture(t) // the viewer sees demo/*, the runner all of main
	writeFile(t, filepath.Join(f.wsDir, ".workflows", "vault.yaml"), `
tasks:
  vault:
    flow:
      s: {type: script, script: "curl -H 'token: sk-live-HIDDEN' {{ broken }"}
`, 0o644)
	writeFile(t, filepath.Join(f.wsDir, ".workflows", "demo.yaml"), `
tasks:
  shown:
    folder: demo
    flow:
      s: {type: script, script: "echo sk-live-SHOWN {{ oops }"}
`, 0o644)
	mainErrors := func(role int) []string {
		var out []string
		for _, ws := range f.as(f.tokens[role], "GET", "/api/workspaces", nil).expect(200).array() {
			if ws["name"] == "main" {
				errs, _ := ws["errors"].([]any)
				for _, e := range errs {
					out = append(out, e.(string))
				}
			}
		}
		return out
	}
	eventually(t, "the load errors", func() bool { return len(mainErrors(roleAdmin)) == 2 })
	admin := strings.Join(mainErrors(roleAdmin), "\n")
	if !strings.Contains(admin, "sk-live-HIDDEN") || !strings.Contains(admin, "sk-live-SHOWN") {
		t.Errorf("admin's errors are not in full:\n%s", admin)
	}
	viewer := mainErrors(roleView)
	if len(viewer) != 1 || !strings.HasPrefix(viewer[0], ".workflows/demo.yaml:6:") || !strings.Contains(viewer[0], "tasks.shown.flow.s.script") {
		t.Fatalf("viewer's errors %q, want only demo.yaml's, located", viewer)
	}
	runner := mainErrors(roleRun)
	if len(runner) != 2 {
		t.Fatalf("runner's errors %q, want both files'", runner)
	}
	for _, e := range append(viewer, runner...) {
		if strings.Contains(e, "sk-live") || strings.Contains(e, "{{") {
			t.Errorf("a restricted user reads template source: %s", e)
		}
	}
}

// A re-run is a new job of the task where it is now: a user who ran a job
// of a task that has since moved where they may not see it cannot re-run
// it, though the old job stays theirs to see.
func TestRerunNeedsRunOnTheTaskWhereItIsNow(t *testing.T) {
	acl := &accounts.ACL{Default: accounts.Deny, Rules: []accounts.ACLRule{
		{Workspace: "*", Tasks: []string{"demo/*"}, Action: accounts.Run, Groups: []string{"viewers"}},
	}}
	f := newACLFixture(t, func(c *fixtureConfig) { c.ACL = acl })
	mover := `
  mover:
    folder: %s
    flow:
      only: {type: script, script: "echo moved"}
`
	f.setWorkflow(withTasks(fmt.Sprintf(mover, "demo")), func() bool { return f.taskFolder("mover") == "demo" })
	user := f.tokens[roleView]
	job := f.as(user, "POST", "/api/workspaces/main/tasks/mover/execute", map[string]any{"input": map[string]any{}}).expect(200).object()["job_id"].(string)
	f.as(user, "POST", "/api/jobs/"+job+"/cancel", nil).expect(200)
	f.setWorkflow(withTasks(fmt.Sprintf(mover, "vault")), func() bool { return f.taskFolder("mover") == "vault" })
	f.as(user, "GET", "/api/jobs/"+job, nil).expect(200)
	f.as(user, "POST", "/api/jobs/"+job+"/rerun", map[string]any{}).expectError(http.StatusNotFound, "mover")
	f.as(f.tokens[roleAdmin], "POST", "/api/jobs/"+job+"/rerun", map[string]any{}).expect(200)
}
