package api_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/store"
)

var testAuditKey = audit.Key("api test audit key 0123456789")

// oneStore makes the fixture's engine and its users share one bbolt
// file, as a server's do, so the account changes and the engine's
// entries are one chain.
func oneStore(c *fixtureConfig) {
	db := c.Users.(*store.DB)
	db.SetAuditKey(testAuditKey)
	c.engine.Store, c.Audit = db, db
}

// auditPages reads the whole trail as token through GET /api/audit, a
// few entries a page, and checks the chain against the head it answers.
func auditPages(t *testing.T, f *aclFixture, token string) []audit.Entry {
	t.Helper()
	var all []audit.Entry
	var anchor audit.Head
	var head audit.Head
	cursor := ""
	for {
		var page wire.AuditPage
		r := f.as(token, "GET", "/api/audit?limit=4"+cursor, nil).expect(200)
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		if cursor == "" {
			anchor, head = page.Anchor, page.Head
		}
		all = append(all, page.Entries...)
		if page.Next == nil {
			break
		}
		cursor = fmt.Sprintf("&cursor=%d", *page.Next)
	}
	if err := audit.Verify(testAuditKey, anchor, all, &head); err != nil {
		t.Fatalf("the trail's chain: %v", err)
	}
	return all
}

func findEntry(es []audit.Entry, action, target string) *audit.Entry {
	for i := range es {
		if es[i].Action == action && (target == "" || es[i].Target == target) {
			return &es[i]
		}
	}
	return nil
}

// Every action the trail records, made through the API by users and an
// API key, is in GET /api/audit with its actor, outcome and client
// address, in one chain that verifies; nothing secret is in it.
func TestAuditRecordsWhoDidWhatThroughTheAPI(t *testing.T) {
	f := newACLFixture(t, oneStore)
	writeFile(t, f.wsDir+"/.workflows/approve.yaml", approvalWorkflow, 0o644)
	eventually(t, "the approval task to load", func() bool {
		return f.as(f.tokens[roleAdmin], "GET", "/api/workspaces/main/tasks/gated", nil).status == 200
	})
	admin, runner, viewer := f.tokens[roleAdmin], f.tokens[roleRun], f.tokens[roleView]

	f.api("POST", "/api/auth/login", map[string]string{"email": "admin@example.com", "password": "wrong"}).expect(401)
	key := f.as(admin, "POST", "/api/auth/api-keys", map[string]any{"name": "ci", "scopes": []string{"run", "read"}}).expect(200).object()
	jobID := f.as(key["key"].(string), "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "ada"}}).
		expect(200).object()["job_id"].(string)
	f.as(runner, "POST", "/api/jobs/"+jobID+"/cancel", nil).expect(200)
	rerunID := f.as(runner, "POST", "/api/jobs/"+jobID+"/rerun", map[string]any{}).expect(200).object()["job_id"].(string)
	f.as(viewer, "POST", "/api/jobs/"+rerunID+"/cancel", nil).expect(403)
	gated := f.as(admin, "POST", "/api/workspaces/main/tasks/gated/execute", map[string]any{"input": map[string]any{"token": "s3cret-value"}}).
		expect(200).object()["job_id"].(string)
	eventually(t, "the gate to wait", func() bool {
		return f.as(admin, "POST", "/api/jobs/"+gated+"/steps/gate/approve", map[string]any{"approved": true}).status == 200
	})
	newID := f.as(admin, "POST", "/api/users", map[string]any{"email": "new@example.com", "password": "long enough password"}).expect(201).object()["id"].(string)
	f.as(admin, "PUT", "/api/users/"+newID+"/groups", map[string]any{"groups": []string{"runners"}}).expect(200)
	f.as(admin, "DELETE", "/api/users/"+newID, nil).expect(200)
	f.as(admin, "DELETE", "/api/auth/api-keys/"+key["prefix"].(string), nil).expect(200)
	_, refresh := f.login("admin@example.com", "pw")
	f.api("POST", "/api/auth/logout", map[string]string{"refresh_token": refresh}).expect(200)
	_, stolen := f.login("run@example.com", "pw")
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": stolen}).expect(200)
	f.api("POST", "/api/auth/refresh", map[string]string{"refresh_token": stolen}).expect(401)

	var es []audit.Entry
	eventually(t, "the queued entries (denied, failed, sign-out) to be committed", func() bool {
		es = auditPages(t, f, admin)
		return findEntry(es, audit.SignOut, "") != nil && findEntry(es, audit.RequestDenied, "") != nil &&
			slices.ContainsFunc(es, func(e audit.Entry) bool { return strings.Contains(e.Reason, "used twice") })
	})
	checks := []struct {
		action, target, source, actor, outcome string
	}{
		{audit.SignIn, "user/" + f.ids[roleRun], audit.SourceUser, "run@example.com", audit.OK},
		{audit.KeyCreate, "api_key/" + key["prefix"].(string), audit.SourceUser, "admin@example.com", audit.OK},
		{audit.JobExecute, "job/" + jobID, audit.SourceAPIKey, "admin@example.com", audit.OK},
		{audit.JobCancel, "job/" + jobID, audit.SourceUser, "run@example.com", audit.OK},
		{audit.JobRerun, "job/" + rerunID, audit.SourceUser, "run@example.com", audit.OK},
		{audit.RequestDenied, "POST /api/jobs/" + rerunID + "/cancel", audit.SourceUser, "view@example.com", audit.Denied},
		{audit.ApprovalGrant, "job/" + gated + "/gate", audit.SourceUser, "admin@example.com", audit.OK},
		{audit.UserCreate, "user/" + newID, audit.SourceUser, "admin@example.com", audit.OK},
		{audit.UserUpdate, "user/" + newID, audit.SourceUser, "admin@example.com", audit.OK},
		{audit.UserDelete, "user/" + newID, audit.SourceUser, "admin@example.com", audit.OK},
		{audit.KeyRevoke, "api_key/" + key["prefix"].(string), audit.SourceUser, "admin@example.com", audit.OK},
		{audit.SignIn, "", audit.SourceUser, "admin@example.com", audit.Failed},
	}
	for _, c := range checks {
		var got *audit.Entry
		for i := range es {
			e := &es[i]
			if e.Action == c.action && (c.target == "" || e.Target == c.target) && e.Outcome == c.outcome {
				got = e
				break
			}
		}
		if got == nil {
			t.Errorf("no %s %s entry (%s)", c.action, c.target, c.outcome)
			continue
		}
		if got.Source != c.source || got.Actor.Email != c.actor || got.ClientAddress != "127.0.0.1" {
			t.Errorf("%s %s: %+v, want source %s, actor %s, from 127.0.0.1", c.action, c.target, got, c.source, c.actor)
		}
	}
	if e := findEntry(es, audit.JobExecute, "job/"+jobID); e != nil && e.Actor.Key != "ci" {
		t.Errorf("the key's execute names key %q, want ci", e.Actor.Key)
	}
	if e := findEntry(es, audit.SignOut, ""); e.Target != "user/"+f.ids[roleAdmin] {
		t.Errorf("sign-out %+v", e)
	}
	raw, _ := json.Marshal(es)
	for _, secret := range []string{"s3cret-value", key["key"].(string), admin, refresh, stolen, `"pw"`, "long enough password"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the trail holds a secret: %.20s…", secret)
		}
	}

	// The trail is for admins: others are refused (and that is recorded).
	f.as(runner, "GET", "/api/audit", nil).expect(403)
	f.as(admin, "GET", "/api/audit?since=yesterday", nil).expect(400)
	filtered := f.as(admin, "GET", "/api/audit?action=job.&actor=run@example.com", nil).expect(200)
	var page wire.AuditPage
	_ = json.Unmarshal(filtered.body, &page)
	actions := []string{}
	for _, e := range page.Entries {
		actions = append(actions, e.Action)
	}
	if !slices.Equal(actions, []string{audit.JobCancel, audit.JobRerun}) {
		t.Errorf("filtered by action job. and actor run@: %v", actions)
	}
}

const hookWorkflow = `
tasks:
  hooked:
    flow:
      s: {type: script, script: echo hooked}
triggers:
  ping:
    type: webhook
    name: ping-hook
    task: hooked
    secret: s3cret
`

// A webhook's job names the webhook as its actor (never its secret), an
// MCP tool's job the user behind it with source mcp.
func TestAuditRecordsWebhooksAndMCPCalls(t *testing.T) {
	f := newACLFixture(t, oneStore)
	writeFile(t, f.wsDir+"/.workflows/hook.yaml", hookWorkflow, 0o644)
	var hooked string
	eventually(t, "the webhook to load", func() bool {
		r := f.api("POST", "/hooks/ping-hook?secret=s3cret", map[string]any{"x": 1})
		if r.status == 200 {
			hooked = r.object()["job_id"].(string)
		}
		return r.status == 200
	})
	m := f.mcp(t, f.tokens[roleAdmin])
	viaMCP := m.ok("execute_task", map[string]any{"workspace": "main", "task": "hello", "input": map[string]any{"name": "ada"}})["job_id"].(string)
	es := auditPages(t, f, f.tokens[roleAdmin])
	hook := findEntry(es, audit.JobExecute, "job/"+hooked)
	if hook == nil || hook.Source != audit.SourceWebhook || hook.Actor.ID != "main/ping-hook" || hook.ClientAddress != "127.0.0.1" {
		t.Errorf("the webhook's entry: %+v", hook)
	}
	tool := findEntry(es, audit.JobExecute, "job/"+viaMCP)
	if tool == nil || tool.Source != audit.SourceMCP || tool.Actor.Email != "admin@example.com" || tool.ClientAddress != "127.0.0.1" {
		t.Errorf("the MCP tool's entry: %+v", tool)
	}
	raw, _ := json.Marshal(es)
	if strings.Contains(string(raw), "s3cret") {
		t.Error("the trail holds the webhook's secret")
	}
	// A tool refused by the ACL is recorded as its route's refusal is.
	viewer := f.mcp(t, f.tokens[roleView])
	viewer.refused("cancel_job", map[string]any{"job_id": viaMCP}, "may view")
	eventually(t, "the refused tool call's entry", func() bool {
		e := findEntry(auditPages(t, f, f.tokens[roleAdmin]), audit.RequestDenied, "POST /api/jobs/"+viaMCP+"/cancel")
		return e != nil && e.Source == audit.SourceMCP && e.Actor.Email == "view@example.com" && e.Outcome == audit.Denied
	})
}
