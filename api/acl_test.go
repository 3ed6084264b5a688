package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/store"
)

// The roles of the ACL tests, by what the fixture's ACL gives them on the
// task hello (folder demo/greetings) of the workspace main.
const (
	roleAdmin = iota // admins always run
	roleRun          // group runners: run on every task of main
	roleView         // group viewers: view on demo/* in any workspace
	roleDeny         // no group: the default, deny
	roleCount
)

var roleNames = [roleCount]string{"admin", "run", "view", "deny"}

// testACL is the fixture's ACL: the viewer sees hello but not other.
var testACL = &accounts.ACL{Default: accounts.Deny, Rules: []accounts.ACLRule{
	{Workspace: "main", Tasks: []string{"*"}, Action: accounts.Run, Groups: []string{"runners"}},
	{Workspace: "*", Tasks: []string{"demo/*"}, Action: accounts.View, Groups: []string{"viewers"}},
}}

// aclFixture is a real server (engine, bbolt, HTTP) with auth and the ACL
// on, and a logged-in user of each role.
type aclFixture struct {
	*authFixture
	tokens [roleCount]string
	ids    [roleCount]string
}

func newACLFixture(t *testing.T, opts ...fixtureOption) *aclFixture {
	t.Helper()
	users, err := store.Open(filepath.Join(t.TempDir(), "users.db"))
	if err != nil {
		t.Fatalf("users store: %v", err)
	}
	t.Cleanup(func() { users.Close() })
	clock := &testClock{now: time.Now().UTC().Truncate(time.Second)}
	cfg := &auth.Config{
		JWTSecret: testJWTSecret, RefreshSecret: testRefreshSecret,
		Providers: map[string]auth.Provider{"local": {Type: auth.ProviderInternal}}, Now: clock.Now,
	}
	f := newFixture(t, append([]fixtureOption{func(c *fixtureConfig) { c.Auth, c.Users, c.ACL = cfg, users, testACL }}, opts...)...)
	af := &aclFixture{authFixture: &authFixture{fixture: f, users: users, clock: clock, cfg: cfg}}
	groups := [roleCount][]string{nil, {"runners"}, {"viewers", "unrelated"}, {"unrelated"}}
	for r := range roleCount {
		email := roleNames[r] + "@example.com"
		af.ids[r] = af.addUserIn(email, r == roleAdmin, groups[r]...)
		af.tokens[r], _ = af.login(email, "pw")
	}
	return af
}

// addUserIn stores a user with password "pw" in the groups.
func (f *aclFixture) addUserIn(email string, admin bool, groups ...string) string {
	f.t.Helper()
	hash, err := auth.HashPassword("pw")
	if err != nil {
		f.t.Fatal(err)
	}
	if groups == nil {
		groups = []string{}
	}
	u := &auth.User{ID: uuid.NewString(), Email: email, PasswordHash: hash, IsAdmin: admin, Groups: groups, CreatedAt: f.clock.Now()}
	if err := f.users.CreateUser(context.Background(), u); err != nil {
		f.t.Fatalf("create user %s: %v", email, err)
	}
	return u.ID
}

// run executes a task of main as the admin and returns the job id.
func (f *aclFixture) run(task string) string {
	f.t.Helper()
	body := map[string]any{"input": map[string]any{}}
	if task == "hello" {
		body["input"] = map[string]any{"name": "acl"}
	}
	m := f.as(f.tokens[roleAdmin], "POST", "/api/workspaces/main/tasks/"+task+"/execute", body).expect(200).object()
	return m["job_id"].(string)
}

// routeCall is one request a route walk makes: the path with its
// parameters filled in, and a body.
type routeCall struct {
	path string
	body any
}

// routeCase says how to call a route and what each role must get.
type routeCase struct {
	call func(f *aclFixture, n int) routeCall
	want [roleCount]int // admin, run, view, deny
}

func fixed(path string, body any) func(*aclFixture, int) routeCall {
	return func(*aclFixture, int) routeCall { return routeCall{path: path, body: body} }
}

// onNewJob calls a job route on a fresh pending job of hello, so that
// what one role does (cancel) does not change what the next one gets.
func onNewJob(suffix string, body any) func(*aclFixture, int) routeCall {
	return func(f *aclFixture, _ int) routeCall {
		return routeCall{path: "/api/jobs/" + f.run("hello") + suffix, body: body}
	}
}

// onNewUser calls a user route on a fresh user.
func onNewUser(suffix string, body any) func(*aclFixture, int) routeCall {
	return func(f *aclFixture, n int) routeCall {
		id := f.addUserIn(fmt.Sprintf("victim%d@example.com", n), false)
		return routeCall{path: "/api/users/" + id + suffix, body: body}
	}
}

var (
	all200  = [roleCount]int{200, 200, 200, 200}
	admin   = [roleCount]int{200, 403, 403, 403}
	readJob = [roleCount]int{200, 200, 200, 404}
	runJob  = [roleCount]int{200, 200, 403, 404}
)

// aclRouteTable is every /api route and what each role gets from it. A
// route the router has and this table lacks fails the walk: a new route
// must say here how the ACL treats it.
var aclRouteTable = map[string]routeCase{
	"GET /api/config":       {fixed("/api/config", nil), all200},
	"GET /api/openapi.json": {fixed("/api/openapi.json", nil), all200},

	"GET /api/workspaces":                            {fixed("/api/workspaces", nil), all200},
	"GET /api/workspaces/{ws}/tasks":                 {fixed("/api/workspaces/main/tasks", nil), readJob},
	"GET /api/workspaces/{ws}/tasks/{name}":          {fixed("/api/workspaces/main/tasks/hello", nil), readJob},
	"POST /api/workspaces/{ws}/tasks/{name}/execute": {fixed("/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}), runJob},
	"GET /api/workspaces/{ws}/triggers":              {fixed("/api/workspaces/main/triggers", nil), readJob},
	"GET /api/jobs":                                  {fixed("/api/jobs", nil), all200},
	"GET /api/jobs/{id}":                             {onNewJob("", nil), readJob},
	"POST /api/jobs/{id}/cancel":                     {onNewJob("/cancel", nil), runJob},
	"POST /api/jobs/{id}/rerun":                      {onNewJob("/rerun", nil), runJob},
	// Admins only; the job does not wait, so an admin gets 409.
	"POST /api/jobs/{id}/priority": {onNewJob("/priority", map[string]any{"priority": 1}), [roleCount]int{409, 403, 403, 404}},
	// Filtered like the lists (TestQueuesListOnlyVisibleJobs).
	"GET /api/queues":                          {fixed("/api/queues", nil), all200},
	"POST /api/jobs/{id}/steps/{step}/approve": {onNewJob("/steps/say/approve", map[string]any{"approved": true}), [roleCount]int{409, 409, 403, 404}},
	"GET /api/jobs/{id}/logs":                  {onNewJob("/logs", nil), readJob},
	"GET /api/jobs/{id}/steps":                 {onNewJob("/steps", nil), readJob},
	"GET /api/jobs/{id}/steps/{step}/logs":     {onNewJob("/steps/say/logs", nil), readJob},
	"GET /api/jobs/{id}/logs/stream":           {onNewJob("/logs/stream", nil), [roleCount]int{426, 426, 426, 404}},
	// The event stream filters each event (TestFeedHideDeniedTasks);
	// without Accept: text/event-stream it answers 406 to everyone.
	"GET /api/events":  {fixed("/api/events", nil), [roleCount]int{406, 406, 406, 406}},
	"GET /api/workers": {fixed("/api/workers", nil), all200},
	"GET /api/workers/{id}": {func(f *aclFixture, n int) routeCall {
		return routeCall{path: "/api/workers/" + f.register(fmt.Sprintf("w%d", n))}
	}, all200},
	"POST /api/auth/login":                   {fixed("/api/auth/login", map[string]string{"email": "nobody@example.com", "password": "wrong"}), [roleCount]int{401, 401, 401, 401}},
	"POST /api/auth/refresh":                 {fixed("/api/auth/refresh", map[string]string{"refresh_token": "bogus"}), [roleCount]int{401, 401, 401, 401}},
	"POST /api/auth/logout":                  {fixed("/api/auth/logout", map[string]string{"refresh_token": "bogus"}), all200},
	"GET /api/auth/me":                       {fixed("/api/auth/me", nil), all200},
	"PUT /api/auth/me/password":              {fixed("/api/auth/me/password", map[string]string{"current_password": "wrong", "password": "long enough password"}), [roleCount]int{400, 400, 400, 400}},
	"POST /api/auth/api-keys":                {fixed("/api/auth/api-keys", map[string]string{"name": "walk"}), all200},
	"GET /api/auth/api-keys":                 {fixed("/api/auth/api-keys", nil), all200},
	"DELETE /api/auth/api-keys/{prefix}":     {fixed("/api/auth/api-keys/appk_nop", nil), [roleCount]int{404, 404, 404, 404}},
	"GET /api/auth/oidc/{provider}":          {fixed("/api/auth/oidc/nope", nil), [roleCount]int{404, 404, 404, 404}},
	"GET /api/auth/oidc/{provider}/callback": {fixed("/api/auth/oidc/nope/callback?code=c&state=s", nil), [roleCount]int{404, 404, 404, 404}},
	"GET /api/users":                         {fixed("/api/users", nil), admin},
	"POST /api/users": {func(_ *aclFixture, n int) routeCall {
		return routeCall{path: "/api/users", body: map[string]any{"email": fmt.Sprintf("new%d@example.com", n), "password": "long enough password"}}
	}, [roleCount]int{201, 403, 403, 403}},
	"GET /api/users/{id}":          {onNewUser("", nil), admin},
	"DELETE /api/users/{id}":       {onNewUser("", nil), admin},
	"PUT /api/users/{id}/admin":    {onNewUser("/admin", map[string]bool{"is_admin": false}), admin},
	"PUT /api/users/{id}/groups":   {onNewUser("/groups", map[string][]string{"groups": {"runners"}}), admin},
	"PUT /api/users/{id}/password": {onNewUser("/password", map[string]string{"password": "long enough password"}), admin},
	"GET /api/groups":              {fixed("/api/groups", nil), admin},
	"GET /api/audit":               {fixed("/api/audit", nil), admin},
}

// Every /api route of the router, called as each role against a real
// server, answers what the table says: no route forgets the ACL.
func TestEveryAPIRouteAppliesTheACL(t *testing.T) {
	f := newACLFixture(t)
	var routes []string
	for r := range routeTable(t) {
		if _, path, _ := strings.Cut(r, " "); strings.HasPrefix(path, "/api/") {
			routes = append(routes, r)
		}
	}
	sort.Strings(routes)
	if len(routes) < 30 {
		t.Fatalf("only %d /api routes found", len(routes))
	}
	n := 0
	for _, route := range routes {
		tc, ok := aclRouteTable[route]
		if !ok {
			t.Errorf("%s is not in aclRouteTable: add what admin, run, view and deny users get from it", route)
			continue
		}
		method, _, _ := strings.Cut(route, " ")
		var got [roleCount]int
		for r := range roleCount {
			n++
			c := tc.call(f, n)
			got[r] = f.as(f.tokens[r], method, c.path, c.body).status
		}
		if got != tc.want {
			t.Errorf("%s: statuses (admin, run, view, deny) = %v, want %v", route, got, tc.want)
		}
	}
	for route := range aclRouteTable {
		if !routeTable(t)[route] {
			t.Errorf("aclRouteTable has %s, which is no route", route)
		}
	}
}

// What each role sees in the lists: denied tasks and their jobs are
// absent, totals and counts count only what is visible, and a workspace
// with no visible task is absent.
func TestACLFiltersListsAndCounts(t *testing.T) {
	f := newACLFixture(t)
	var hello, other []string
	for range 3 {
		hello = append(hello, f.run("hello"))
	}
	for range 4 {
		other = append(other, f.run("other"))
	}
	jobsOf := func(tok, query string) ([]string, float64) {
		m := f.as(tok, "GET", "/api/jobs"+query, nil).expect(200).object()
		var ids []string
		for _, it := range m["items"].([]any) {
			ids = append(ids, it.(map[string]any)["job_id"].(string))
		}
		return ids, m["total"].(float64)
	}
	admin, runner, viewer, denied := f.tokens[roleAdmin], f.tokens[roleRun], f.tokens[roleView], f.tokens[roleDeny]

	if ids, total := jobsOf(admin, ""); len(ids) != 7 || total != 7 {
		t.Fatalf("admin: %d jobs, total %v; want 7", len(ids), total)
	}
	if ids, total := jobsOf(runner, "?workspace=main"); len(ids) != 7 || total != 7 {
		t.Fatalf("runner: %d jobs, total %v; want 7", len(ids), total)
	}
	// The viewer's pages are full pages of hello jobs, newest first.
	ids, total := jobsOf(viewer, "?limit=2")
	if total != 3 || fmt.Sprint(ids) != fmt.Sprint([]string{hello[2], hello[1]}) {
		t.Fatalf("viewer page 1: %v total %v; want the two newest hello jobs of 3", ids, total)
	}
	if ids, _ := jobsOf(viewer, "?limit=2&offset=2"); fmt.Sprint(ids) != fmt.Sprint([]string{hello[0]}) {
		t.Fatalf("viewer page 2: %v; want the oldest hello job", ids)
	}
	if ids, total := jobsOf(viewer, "?workspace=main&task_name=other"); len(ids) != 0 || total != 0 {
		t.Fatalf("viewer asking for other: %v total %v", ids, total)
	}
	if ids, total := jobsOf(denied, ""); len(ids) != 0 || total != 0 {
		t.Fatalf("denied: %v total %v", ids, total)
	}

	// Workspaces: tasks_count counts visible tasks; broken (no task) and,
	// for the denied user, main are absent.
	wsNames := func(tok string) map[string]float64 {
		out := map[string]float64{}
		for _, w := range f.as(tok, "GET", "/api/workspaces", nil).expect(200).array() {
			out[w["name"].(string)] = w["tasks_count"].(float64)
		}
		return out
	}
	if got := fmt.Sprint(wsNames(admin)); got != "map[broken:0 main:2]" {
		t.Fatalf("admin workspaces %s", got)
	}
	if got := fmt.Sprint(wsNames(runner)); got != "map[main:2]" {
		t.Fatalf("runner workspaces %s", got)
	}
	if got := fmt.Sprint(wsNames(viewer)); got != "map[main:1]" {
		t.Fatalf("viewer workspaces %s", got)
	}
	if got := fmt.Sprint(wsNames(denied)); got != "map[]" {
		t.Fatalf("denied workspaces %s", got)
	}
	tasks := f.as(viewer, "GET", "/api/workspaces/main/tasks", nil).expect(200).array()
	if len(tasks) != 1 || tasks[0]["name"] != "hello" {
		t.Fatalf("viewer tasks %v", tasks)
	}
	// Triggers: the viewer sees those of hello only (nightly, incoming),
	// not paused (of other).
	var trig []string
	for _, tr := range f.as(viewer, "GET", "/api/workspaces/main/triggers", nil).expect(200).array() {
		trig = append(trig, tr["name"].(string))
	}
	if fmt.Sprint(trig) != "[incoming nightly]" {
		t.Fatalf("viewer triggers %v", trig)
	}

	// A job of other is unknown to the viewer, everywhere.
	job := other[0]
	for _, path := range []string{"/api/jobs/" + job, "/api/jobs/" + job + "/logs", "/api/jobs/" + job + "/steps/only/logs", "/api/jobs/" + job + "/logs/stream"} {
		f.as(viewer, "GET", path, nil).expectError(404, "not found")
	}
	for _, path := range []string{"/cancel", "/rerun"} {
		f.as(viewer, "POST", "/api/jobs/"+job+path, nil).expectError(404, "not found")
	}
	f.as(viewer, "GET", "/api/workspaces/main/tasks/other", nil).expect(404)
	// The 404 reads like that of a job that does not exist.
	ghost := uuid.NewString()
	hidden := f.as(viewer, "GET", "/api/jobs/"+job, nil).errorMessage()
	missing := f.as(viewer, "GET", "/api/jobs/"+ghost, nil).errorMessage()
	if strings.ReplaceAll(hidden, job, "ID") != strings.ReplaceAll(missing, ghost, "ID") {
		t.Fatalf("hidden job says %q, a missing one %q", hidden, missing)
	}
	// The viewer's refusal to run says why.
	f.as(viewer, "POST", "/api/jobs/"+hello[0]+"/cancel", nil).expectError(403, "view")

	// The WebSocket stream: a denied user cannot open it, even by ?token=.
	r := f.do("GET", "/api/jobs/"+job+"/logs/stream?token="+viewer, nil, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
	if r.status != http.StatusNotFound {
		t.Fatalf("stream of a hidden job: %d", r.status)
	}

	// /api/config says the ACL is on.
	if m := f.api("GET", "/api/config", nil).expect(200).object(); m["acl_enabled"] != true {
		t.Fatalf("config %v", m)
	}
}

// Webhooks are outside the ACL: their secret is their guard, and the job
// a hook starts is then seen by whoever may see its task.
func TestWebhooksAreNotSubjectToTheACL(t *testing.T) {
	f := newACLFixture(t)
	writeFile(t, filepath.Join(f.wsDir, ".workflows", "hooks.yaml"), `
tasks:
  hooked:
    folder: demo/hooks
    flow:
      s:
        type: script
        script: echo hooked
triggers:
  acl-hook:
    type: webhook
    name: acl-hook
    task: hooked
`, 0o644)
	eventually(t, "the hooked task to load", func() bool {
		r := f.as(f.tokens[roleAdmin], "GET", "/api/workspaces/main/tasks/hooked", nil)
		return r.status == 200
	})
	m := f.api("POST", "/hooks/acl-hook", map[string]any{"x": 1}).expect(200).object()
	id, _ := m["job_id"].(string)
	if id == "" {
		t.Fatalf("hook answered %v", m)
	}
	f.as(f.tokens[roleDeny], "GET", "/api/jobs/"+id, nil).expect(404)
	f.as(f.tokens[roleView], "GET", "/api/jobs/"+id, nil).expect(200)
	f.as(f.tokens[roleView], "POST", "/api/jobs/"+id+"/cancel", nil).expect(403)
}

// A worker's recent steps leave out those of tasks the caller may not see.
func TestWorkerDetailHidesStepsOfHiddenTasks(t *testing.T) {
	f := newACLFixture(t)
	worker := f.register("w1")
	helloJob := f.run("hello")
	f.runStep(worker, helloJob, "say", nil)
	f.runStep(worker, helloJob, "after", nil)
	otherJob := f.run("other")
	f.runStep(worker, otherJob, "only", nil)
	stepsSeen := func(tok string) []string {
		d := f.as(tok, "GET", "/api/workers/"+worker, nil).expect(200).object()
		var out []string
		steps := d["steps"].(map[string]any)
		for _, it := range steps["items"].([]any) {
			st := it.(map[string]any)
			out = append(out, st["task_name"].(string)+"/"+st["step_name"].(string))
		}
		// The total counts what the caller may see, as the job list's does.
		if total := int(steps["total"].(float64)); total != len(out) {
			t.Errorf("steps.total = %d for %d visible steps %v", total, len(out), out)
		}
		sort.Strings(out)
		return out
	}
	if got := fmt.Sprint(stepsSeen(f.tokens[roleAdmin])); got != "[hello/after hello/say other/only]" {
		t.Fatalf("admin sees %s", got)
	}
	if got := fmt.Sprint(stepsSeen(f.tokens[roleView])); got != "[hello/after hello/say]" {
		t.Fatalf("viewer sees %s", got)
	}
	if got := fmt.Sprint(stepsSeen(f.tokens[roleDeny])); got != "[]" {
		t.Fatalf("denied user sees %s", got)
	}
}

// /metrics names every workspace and task with their job counts: with the
// ACL on, only admins and the metrics token read it, not a user the ACL
// hides tasks from.
func TestMetricsNeedAnAdminUnderTheACL(t *testing.T) {
	const metricsToken = "metrics-token-0123456789"
	f := newACLFixture(t, func(c *fixtureConfig) {
		c.MetricsToken = metricsToken
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `appliance_jobs_created_total{task="other",workspace="main"} 1`+"\n")
		})
	})
	want := [roleCount]int{200, 403, 403, 403}
	for r := range roleCount {
		res := f.as(f.tokens[r], "GET", "/metrics", nil)
		if res.status != want[r] {
			t.Errorf("%s user: /metrics = %d, want %d", roleNames[r], res.status, want[r])
		}
		if res.status != 200 && strings.Contains(string(res.body), `task="other"`) {
			t.Errorf("%s user read the hidden task's series", roleNames[r])
		}
	}
	if got := f.as(metricsToken, "GET", "/metrics", nil).status; got != 200 {
		t.Errorf("metrics token: /metrics = %d, want 200", got)
	}
}

// Task lists, task details and job details say what the caller may do
// with the task when the ACL is on (the UI offers only that), and say
// nothing when it is off.
func TestACLAnswersSayThePermission(t *testing.T) {
	f := newACLFixture(t)
	job := f.run("hello")
	want := [roleCount]string{"run", "run", "view"}
	for r := range roleDeny {
		tok := f.tokens[r]
		var got []string
		for _, it := range f.as(tok, "GET", "/api/workspaces/main/tasks", nil).expect(200).array() {
			if it["name"] == "hello" {
				got = append(got, fmt.Sprint(it["permission"]))
			}
		}
		got = append(got,
			fmt.Sprint(f.as(tok, "GET", "/api/workspaces/main/tasks/hello", nil).expect(200).object()["permission"]),
			fmt.Sprint(f.as(tok, "GET", "/api/jobs/"+job, nil).expect(200).object()["permission"]))
		if w := want[r]; fmt.Sprint(got) != fmt.Sprint([]string{w, w, w}) {
			t.Errorf("%s: permission in task list, task, job = %v, want %s everywhere", roleNames[r], got, w)
		}
	}

	// Auth on but no ACL: everyone may do everything, and the answers do
	// not say so.
	plain := newAuthFixture(t, nil)
	plain.addUser("ada@example.com", "long enough password", false)
	tok, _ := plain.login("ada@example.com", "long enough password")
	run := plain.as(tok, "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}).expect(200).object()
	answers := append(plain.as(tok, "GET", "/api/workspaces/main/tasks", nil).expect(200).array(),
		plain.as(tok, "GET", "/api/workspaces/main/tasks/hello", nil).expect(200).object(),
		plain.as(tok, "GET", "/api/jobs/"+run["job_id"].(string), nil).expect(200).object())
	for _, m := range answers {
		if p, ok := m["permission"]; ok {
			t.Errorf("without an ACL %v says permission %v", m["name"], p)
		}
	}
}
