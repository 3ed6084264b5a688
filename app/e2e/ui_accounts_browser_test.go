package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/app/config"
)

// The account pages of the UI in headless Chromium against an auth-on
// server with an ACL: the admin's user management, a user's own password
// and API keys, and controls offered by permission.

// aclWorkspace has a task that runs at once and one that waits for an
// approval, so a job page shows Cancel, Approve, Reject and Re-run.
const aclWorkspace = `tasks:
  hello:
    flow:
      greet: {type: script, script: echo hello from the server}
  ship:
    folder: release
    flow:
      ask: {type: approval, message: "Ship it?"}
      go: {depends_on: [ask], type: script, script: echo shipping}
`

// aclServer is an auth-on server whose ACL lets the group runners run
// every task and the group viewers view them; everyone else sees nothing.
type aclServer struct {
	t     *testing.T
	url   string
	admin string // the admin's access token
}

func startACLServer(t *testing.T) *aclServer {
	t.Helper()
	ws := t.TempDir()
	writeWorkspace(t, ws, aclWorkspace)
	action := func(a accounts.Action) config.ACLAction { return config.ACLAction{Action: a, Set: true} }
	deny := action(accounts.Deny)
	cfg := testServerConfig(t, map[string]string{"main": ws}, 2, withAuth, func(c *config.Server) {
		c.ACL = &config.ACL{Default: &deny, Rules: []config.ACLRule{
			{Workspace: "*", Tasks: []string{"*"}, Action: action(accounts.Run), Groups: []string{"runners"}},
			{Workspace: "*", Tasks: []string{"*"}, Action: action(accounts.View), Groups: []string{"viewers"}},
		}}
		var err error
		if c.Effective.ACL, err = c.ACL.Build(c.Auth); err != nil {
			t.Fatal(err)
		}
	})
	srv, err := startServer(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	s := &aclServer{t: t, url: "http://" + srv.Addr(), admin: loginToken(t, "http://"+srv.Addr(), "first-password")}
	var config map[string]any
	if code := do(t, "GET", s.url+"/api/config", nil, &config); code != 200 || config["acl_enabled"] != true {
		t.Fatalf("config %d %v: the ACL is not on", code, config)
	}
	return s
}

// addUser creates a user through the API as the admin.
func (s *aclServer) addUser(email, password string, groups ...string) string {
	s.t.Helper()
	if groups == nil {
		groups = []string{}
	}
	var u map[string]any
	if code := doAuthBody(s.t, "POST", s.url+"/api/users", s.admin, map[string]any{"email": email, "password": password, "groups": groups}, &u); code != 201 {
		s.t.Fatalf("add user %s: %d %v", email, code, u)
	}
	return u["id"].(string)
}

// loginStatus tries a password login.
func (s *aclServer) loginStatus(email, password string) int {
	s.t.Helper()
	return do(s.t, "POST", s.url+"/api/auth/login", map[string]string{"email": email, "password": password}, nil)
}

// user is GET /api/users/{id} as the admin, with its status.
func (s *aclServer) user(id string) (int, map[string]any) {
	s.t.Helper()
	u := map[string]any{}
	code := doAuth(s.t, "GET", s.url+"/api/users/"+id, s.admin, &u)
	return code, u
}

// until waits, polling the page, for a JavaScript expression to be truthy.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// signIn signs in through the login page as email, after dropping any
// session the tab had, and waits for the header to name the user.
func (b *browser) signIn(url, email, password string) {
	b.t.Helper()
	b.do("sign in as "+email,
		chromedp.Navigate(url+"/login"),
		until(`(localStorage.clear(), true)`),
		chromedp.Navigate(url+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
		chromedp.SetValue(chromedp.CSS(`#login-email`), email),
		chromedp.SetValue(chromedp.CSS(`#login-password`), password),
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		until(`document.querySelector('#signed-in-as')?.textContent === `+jsonString(email)),
	)
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// present is the JavaScript test that a selector matches an element.
func present(sel string) string {
	return `document.querySelector(` + jsonString(sel) + `) !== null`
}

func TestBrowserAdminAddsSetsResetsAndDeletesUsers(t *testing.T) {
	b := newBrowser(t)
	s := startACLServer(t)

	b.signIn(s.url, "admin@example.com", "first-password")
	b.do("go to the users page by the admin's nav link",
		chromedp.WaitVisible(chromedp.CSS(`#nav-admin`)),
		chromedp.Click(chromedp.CSS(`#nav-admin`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-user="admin@example.com"]`)),
	)

	fill := func(email, password, groups string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.SetValue(chromedp.CSS(`#new-email`), email),
			chromedp.SetValue(chromedp.CSS(`#new-name`), "Carol"),
			chromedp.SetValue(chromedp.CSS(`#new-password`), password),
			chromedp.SetValue(chromedp.CSS(`#new-groups`), groups),
			chromedp.Click(chromedp.CSS(`#add-user button[type="submit"]`)),
		)
	}
	b.do("add a user with a short password: the server's 400 shows by the form",
		fill("carol@example.com", "short", "viewers"),
		until(`document.querySelector('#add-user-error').textContent.includes('too short')`),
	)
	b.do("add the user",
		fill("carol@example.com", "carols first password", "viewers, ops"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-user="carol@example.com"]`)),
		pageText("Added carol@example.com."),
	)
	b.do("add the same email again: the server's 409 shows by the form",
		fill("carol@example.com", "carols first password", " "),
		until(`document.querySelector('#add-user-error').textContent.includes('already exists')`),
	)
	b.screenshot("admin-users")

	row := eval[string](b, `document.querySelector('tr[data-user="carol@example.com"]').innerText`)
	if !strings.Contains(row, "ops, viewers") || !strings.Contains(row, "Carol") || !strings.Contains(row, "internal") {
		t.Fatalf("carol's row reads %q, want her name, groups ops, viewers and internal sign-in", row)
	}
	carol := strings.TrimPrefix(eval[string](b, `document.querySelector('tr[data-user="carol@example.com"] a').getAttribute('href')`), "/admin/users/")

	b.do("open carol's page, move her to runners and make her an admin",
		chromedp.Click(chromedp.CSS(`tr[data-user="carol@example.com"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#user-groups`)),
		chromedp.SetValue(chromedp.CSS(`#user-groups`), "runners"),
		chromedp.Click(chromedp.CSS(`#user-admin`)),
		chromedp.Click(chromedp.CSS(`#user-access button[type="submit"]`)),
		until(`document.querySelector('#access-status').textContent.includes('groups runners; an admin')`),
	)
	if code, u := s.user(carol); code != 200 || u["is_admin"] != true || strings.Join(toStrings(u["groups"]), ",") != "runners" {
		t.Fatalf("carol after saving: %d %v", code, u)
	}
	b.do("take her admin status back",
		chromedp.Click(chromedp.CSS(`#user-admin`)),
		chromedp.Click(chromedp.CSS(`#user-access button[type="submit"]`)),
		until(`document.querySelector('#access-status').textContent.includes('not an admin')`),
	)
	b.do("reset her password with a short one: refused by the form",
		chromedp.SetValue(chromedp.CSS(`#reset-password`), "tiny"),
		chromedp.Click(chromedp.CSS(`#reset button[type="submit"]`)),
		until(`document.querySelector('#reset-error').textContent.includes('too short')`),
	)
	b.do("reset her password",
		chromedp.SetValue(chromedp.CSS(`#reset-password`), "carols second password"),
		chromedp.Click(chromedp.CSS(`#reset button[type="submit"]`)),
		until(`document.querySelector('#reset-status').textContent.includes('Password set')`),
	)
	if code, u := s.user(carol); code != 200 || u["is_admin"] != false {
		t.Fatalf("carol after revoking admin: %d %v", code, u)
	}
	if code := s.loginStatus("carol@example.com", "carols first password"); code != http.StatusUnauthorized {
		t.Fatalf("login with the old password: %d, want 401", code)
	}

	// An admin cannot demote themself: the server's refusal shows.
	b.do("try to drop the admin's own admin status",
		chromedp.Navigate(s.url+"/admin"),
		chromedp.Click(chromedp.CSS(`tr[data-user="admin@example.com"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`#user-admin`)),
		chromedp.Click(chromedp.CSS(`#user-admin`)),
		chromedp.Click(chromedp.CSS(`#user-access button[type="submit"]`)),
		until(`document.querySelector('#access-error').textContent.includes('cannot revoke your own admin status')`),
		until(`document.querySelector('#user-admin').checked`),
		until(`!`+present(`#delete-user`)),
	)

	// The new user signs in with the password the admin set; she is no
	// admin, so she has no link to the users page, and the page itself
	// says it is for admins.
	b.signIn(s.url, "carol@example.com", "carols second password")
	if eval[bool](b, `document.querySelector('#nav-admin').hidden`) != true {
		t.Fatal("a user who is no admin has a link to the users page")
	}
	b.do("open the users page as carol",
		chromedp.Navigate(s.url+"/admin"),
		chromedp.WaitVisible(chromedp.CSS(`#admins-only`)),
		pageText("Admins only"),
	)
	b.screenshot("admins-only")
	if eval[bool](b, present(`#add-user`)) {
		t.Fatal("the users page offers its form to a user who is no admin")
	}
	b.do("open a user's page as carol",
		chromedp.Navigate(s.url+"/admin/users/"+carol),
		chromedp.WaitVisible(chromedp.CSS(`#admins-only`)),
	)

	// The admin deletes her, after confirming.
	b.signIn(s.url, "admin@example.com", "first-password")
	b.do("delete carol, changing their mind once",
		chromedp.Navigate(s.url+"/admin/users/"+carol),
		chromedp.WaitVisible(chromedp.CSS(`#delete-user`)),
		chromedp.Click(chromedp.CSS(`#delete-user`)),
		pageText("This cannot be undone."),
		chromedp.Click(chromedp.CSS(`[data-confirm="no"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#delete-user`)),
	)
	if code, _ := s.user(carol); code != 200 {
		t.Fatalf("carol after a cancelled deletion: %d", code)
	}
	b.do("delete carol",
		chromedp.Click(chromedp.CSS(`#delete-user`)),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)),
		pageText("Deleted carol@example.com."),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-user="admin@example.com"]`)),
		until(`!`+present(`tr[data-user="carol@example.com"]`)),
	)
	if code, _ := s.user(carol); code != http.StatusNotFound {
		t.Fatalf("carol after deletion: %d, want 404", code)
	}
	if code := s.loginStatus("carol@example.com", "carols second password"); code != http.StatusUnauthorized {
		t.Fatalf("a deleted user logs in: %d", code)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// The users page pages through the users, PAGE (20) at a time.
func TestBrowserUsersPageIsPaged(t *testing.T) {
	b := newBrowser(t)
	s := startACLServer(t)
	for i := range 21 {
		s.addUser("user"+string(rune('a'+i))+"@example.com", "long enough password")
	}
	b.signIn(s.url, "admin@example.com", "first-password")
	b.do("open the users page",
		chromedp.Navigate(s.url+"/admin"),
		pageText("1–20 of 22"),
	)
	if n := eval[int](b, `document.querySelectorAll('tr[data-user]').length`); n != 20 {
		t.Fatalf("first page: %d rows, want 20", n)
	}
	b.do("go to the next page",
		chromedp.Click(chromedp.CSS(`a[href="/admin?offset=20"]`)),
		pageText("21–22 of 22"),
	)
	if n := eval[int](b, `document.querySelectorAll('tr[data-user]').length`); n != 2 {
		t.Fatalf("second page: %d rows, want 2", n)
	}
}

func TestBrowserUserChangesTheirPasswordAndManagesAPIKeys(t *testing.T) {
	b := newBrowser(t)
	s := startACLServer(t)
	s.addUser("erin@example.com", "erins first password", "runners")

	b.signIn(s.url, "erin@example.com", "erins first password")
	b.do("open the user menu and go to Change password",
		chromedp.Click(chromedp.CSS(`#user-menu summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#signed-in-as`)),
		chromedp.Click(chromedp.CSS(`#user-menu a[href="/account/password"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#current-password`)),
	)
	if eval[bool](b, `document.querySelector('#user-menu').open`) {
		t.Error("the user menu stays open after going to a page")
	}
	b.do("open the menu and close it by clicking elsewhere",
		chromedp.Click(chromedp.CSS(`#user-menu summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#sign-out`)),
		chromedp.Click(chromedp.CSS(`main h1`)),
		until(`!document.querySelector('#user-menu').open`),
	)
	change := func(current, next, again string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.SetValue(chromedp.CSS(`#current-password`), current),
			chromedp.SetValue(chromedp.CSS(`#new-password`), next),
			chromedp.SetValue(chromedp.CSS(`#repeat-password`), again),
			chromedp.Click(chromedp.CSS(`#change-password button[type="submit"]`)),
		)
	}
	b.do("mistype the repetition",
		change("erins first password", "erins second password", "erins second passwort"),
		until(`document.querySelector('#password-error').textContent.includes('differ')`),
	)
	b.do("give a wrong current password",
		change("not my password", "erins second password", "erins second password"),
		until(`document.querySelector('#password-error').textContent.includes('current_password is wrong')`),
	)
	b.do("change the password",
		change("erins first password", "erins second password", "erins second password"),
		until(`document.querySelector('#password-status').textContent.includes('Password changed')`),
	)
	if code := s.loginStatus("erin@example.com", "erins first password"); code != http.StatusUnauthorized {
		t.Fatalf("login with the old password: %d, want 401", code)
	}
	if code := s.loginStatus("erin@example.com", "erins second password"); code != http.StatusOK {
		t.Fatalf("login with the new password: %d, want 200", code)
	}

	// A key is shown once, with a warning and a copy button.
	origin := s.url
	if _, err := chromedp.CallBrowser(b.ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "clipboard-read"}, Setting: cdpbrowser.PermissionSettingGranted, Origin: origin,
	}); err != nil {
		t.Fatalf("grant clipboard-read: %v", err)
	}
	b.do("create an API key from the user menu",
		chromedp.Click(chromedp.CSS(`#user-menu summary`)),
		chromedp.Click(chromedp.CSS(`#user-menu a[href="/account/api-keys"]`)),
		pageText("You have no API keys."),
		chromedp.SetValue(chromedp.CSS(`#key-name`), "ci deploys"),
		chromedp.SetValue(chromedp.CSS(`#key-days`), "30"),
		chromedp.Click(chromedp.CSS(`#create-key button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
		pageText("it will not be shown again"),
		chromedp.WaitVisible(chromedp.CSS(`#api-keys tr[data-key]`)),
		chromedp.Click(chromedp.CSS(`#copy-key`)),
		until(`document.querySelector('#copy-status').textContent === 'Copied.'`),
	)
	b.screenshot("api-key-created")
	key := eval[string](b, `document.querySelector('#new-key').textContent`)
	copied, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if err != nil || copied != key {
		t.Fatalf("the clipboard holds %q (%v), want the key %q", copied, err, key)
	}
	me := map[string]any{}
	if code := doAuth(t, "GET", s.url+"/api/auth/me", key, &me); code != 200 || me["email"] != "erin@example.com" {
		t.Fatalf("the key against the API: %d %v", code, me)
	}
	prefix := eval[string](b, `document.querySelector('#api-keys tr[data-key]').dataset.key`)
	if !strings.HasPrefix(key, prefix) {
		t.Fatalf("the listed key starts with %q, the created one is %q", prefix, key)
	}

	// Reloaded, the page lists the key but no longer shows it.
	b.do("reload the keys page",
		chromedp.Navigate(s.url+"/account/api-keys"),
		chromedp.WaitVisible(chromedp.CSS(`#api-keys tr[data-key="`+prefix+`"]`)),
		pageText("ci deploys"),
	)
	if eval[bool](b, present(`#new-key`)) || strings.Contains(eval[string](b, `document.body.innerHTML`), key) {
		t.Fatal("the key is shown again after a reload")
	}
	b.do("revoke the key",
		chromedp.Click(chromedp.CSS(`#api-keys tr[data-key] button`)),
		chromedp.Click(chromedp.CSS(`[data-confirm="yes"]`)),
		pageText("You have no API keys."),
	)
	if code := doAuth(t, "GET", s.url+"/api/auth/me", key, &map[string]any{}); code != http.StatusUnauthorized {
		t.Fatalf("a revoked key against the API: %d, want 401", code)
	}

	b.do("sign out from the user menu",
		chromedp.Click(chromedp.CSS(`#user-menu summary`)),
		chromedp.Click(chromedp.CSS(`#sign-out`)),
		chromedp.WaitVisible(chromedp.CSS(`#login-email`)),
	)
	if b.localStorage("appliance.access_token") != "" {
		t.Fatal("a token is stored after signing out")
	}
}

func TestBrowserOffersRunControlsOnlyToUsersWhoMayRun(t *testing.T) {
	b := newBrowser(t)
	s := startACLServer(t)
	s.addUser("viewer@example.com", "viewers password", "viewers")
	s.addUser("runner@example.com", "runners password", "runners")
	var started map[string]string
	if code := doAuthBody(t, "POST", s.url+"/api/workspaces/main/tasks/ship/execute", s.admin, map[string]any{"input": map[string]any{}}, &started); code != 200 {
		t.Fatalf("execute ship: %d %v", code, started)
	}
	job := started["job_id"]
	waitUntil(t, "the ship job to wait for its approval", func() bool {
		var j struct {
			Steps []struct {
				StepName string `json:"step_name"`
				Status   string `json:"status"`
			} `json:"steps"`
		}
		doAuth(t, "GET", s.url+"/api/jobs/"+job, s.admin, &j)
		for _, st := range j.Steps {
			if st.StepName == "ask" && st.Status == "waiting" {
				return true
			}
		}
		return false
	})
	// The controls a user is offered: visible buttons, but for copying an id
	// and the log's own tools (search, downloads), which are for anyone who
	// may view.
	controls := `[...document.querySelectorAll('main button:not(.copy-id)')].filter((b) => !b.closest('.logs') && b.checkVisibility()).map((b) => b.textContent).join(',')`

	b.signIn(s.url, "viewer@example.com", "viewers password")
	b.do("see the task marked view only on the dashboard",
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/main/ship"]`)),
		until(`document.querySelector('a[href="/tasks/main/ship"]').parentElement.innerText.includes('view only')`),
	)
	b.do("open the task as the viewer",
		chromedp.Navigate(s.url+"/tasks/main/ship"),
		chromedp.WaitVisible(chromedp.CSS(`.view-only`)),
		pageText("View only: you may not run this task."),
	)
	if eval[bool](b, present(`form.run-form`)) {
		t.Fatal("the viewer is offered the Run form")
	}
	b.do("open the waiting job as the viewer",
		chromedp.Navigate(s.url+"/jobs/"+job),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="ask"] .status-waiting`)),
		pageText("Ship it?"),
		pageText("View only: you may not cancel or re-run this job."),
		pageText("View only: you may not approve or reject this step."),
	)
	b.screenshot("job-as-viewer")
	if got := eval[string](b, controls); got != "" {
		t.Fatalf("the viewer is offered the buttons %q", got)
	}

	b.signIn(s.url, "runner@example.com", "runners password")
	b.do("see the task on the dashboard, not marked view only",
		chromedp.WaitVisible(chromedp.CSS(`a[href="/tasks/main/ship"]`)),
	)
	if eval[bool](b, `document.querySelector('main').innerText.includes('view only')`) {
		t.Fatal("the runner's dashboard marks a task view only")
	}
	b.do("open the task as the runner",
		chromedp.Navigate(s.url+"/tasks/main/ship"),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form button[type="submit"]`)),
	)
	b.do("open the waiting job as the runner",
		chromedp.Navigate(s.url+"/jobs/"+job),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-step="ask"] .status-waiting`)),
		pageText("Ship it?"),
	)
	if got := eval[string](b, controls); got != "Cancel job,Re-run,Approve,Reject" {
		t.Fatalf("the runner is offered %q, want Cancel job, Re-run, Approve, Reject", got)
	}
	if eval[bool](b, present(`.view-only`)) {
		t.Fatal("the runner is told they may only view")
	}
	b.do("approve as the runner",
		chromedp.Click(chromedp.CSS(`.approval button`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-status .status-completed`)),
	)
}

// Without auth there are no accounts: no user menu, no admin link, and the
// account pages say why they are empty; every task is offered to run.
func TestBrowserAccountPagesWithoutAuthSaySo(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	b.do("open the users page",
		chromedp.Navigate(f.url+"/admin"),
		pageText("runs without authentication"),
	)
	if eval[bool](b, present(`#user-menu`)) || !eval[bool](b, `document.querySelector('#nav-admin').hidden`) {
		t.Fatal("an auth-off server shows a user menu or the admin link")
	}
	b.do("open the API keys page",
		chromedp.Navigate(f.url+"/account/api-keys"),
		pageText("there is no account to manage"),
	)
	b.do("open a task",
		chromedp.Navigate(f.url+"/tasks/examples/hello-world"),
		chromedp.WaitVisible(chromedp.CSS(`form.run-form button[type="submit"]`)),
	)
}

// The keys page's scope checkboxes make the key: unchecking approve and
// admin creates a read+run key, which the API lists with those scopes and
// holds to them; no box checked is refused on the page.
func TestBrowserCreatesAnAPIKeyWithTheCheckedScopes(t *testing.T) {
	b := newBrowser(t)
	s := startACLServer(t)
	s.addUser("erin@example.com", "erins password", "runners")
	b.signIn(s.url, "erin@example.com", "erins password")
	uncheck := func(scopes ...string) chromedp.Action[chromedp.Void] {
		var steps []chromedp.Action[chromedp.Void]
		for _, sc := range scopes {
			steps = append(steps, chromedp.Click(chromedp.CSS(`#key-scope-`+sc)))
		}
		return chromedp.Steps(steps...)
	}
	b.do("open the keys page: every scope is checked",
		chromedp.Navigate(s.url+"/account/api-keys"),
		chromedp.WaitVisible(chromedp.CSS(`#key-scopes`)),
		until(`[...document.querySelectorAll('#key-scopes input')].every((b) => b.checked)`),
	)
	b.do("uncheck every scope and submit",
		chromedp.SetValue(chromedp.CSS(`#key-name`), "no scopes"),
		uncheck("read", "run", "approve", "admin"),
		chromedp.Click(chromedp.CSS(`#create-key button[type="submit"]`)),
		until(`document.querySelector('#key-error').textContent.includes('check at least one')`),
	)
	b.do("check read and run again and create the key",
		chromedp.SetValue(chromedp.CSS(`#key-name`), "assistant"),
		uncheck("read", "run"), // a click checks an unchecked box
		chromedp.Click(chromedp.CSS(`#create-key button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
		chromedp.WaitVisible(chromedp.CSS(`#api-keys tr[data-key]`)),
		// The form is ready for the next key: every scope checked again.
		until(`[...document.querySelectorAll('#key-scopes input')].every((b) => b.checked)`),
	)
	key := eval[string](b, `document.querySelector('#new-key').textContent`)
	if row := eval[string](b, `document.querySelector('#api-keys tr[data-key]').textContent`); !strings.Contains(row, "read, run") {
		t.Errorf("the keys table shows %q, want the scopes read, run", row)
	}

	// The API has the key with exactly the checked scopes, and holds it to them.
	var keys []wire.APIKey
	if code := doAuth(t, "GET", s.url+"/api/auth/api-keys", key, &keys); code != 200 {
		t.Fatalf("list keys with the new key: %d", code)
	}
	if len(keys) != 1 || keys[0].Name != "assistant" || !strings.HasPrefix(key, keys[0].Prefix) || !slices.Equal(keys[0].Scopes, []string{"read", "run"}) {
		t.Fatalf("the API lists %+v, want one key assistant with scopes [read run]", keys)
	}
	if code := doAuthBody(t, "POST", s.url+"/api/auth/api-keys", key, map[string]any{"name": "more"}, &map[string]any{}); code != http.StatusForbidden {
		t.Fatalf("creating a key with a read+run key answered %d, want 403 (admin scope)", code)
	}
}
