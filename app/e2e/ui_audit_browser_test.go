package e2e

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The Audit page in headless Chromium: an admin sees the trail (their
// sign-in, a refused request of another user) and filters it; a user
// who is no admin is not offered the page and is refused it.
func TestUIAuditPageShowsTheTrailToAdminsOnly(t *testing.T) {
	s := startACLServer(t)
	s.addUser("viewer@example.com", "viewer-password", "viewers")
	var tokens map[string]any
	if code := do(t, "POST", s.url+"/api/auth/login", map[string]string{"email": "viewer@example.com", "password": "viewer-password"}, &tokens); code != 200 {
		t.Fatalf("viewer login: %d", code)
	}
	viewer, _ := tokens["access_token"].(string)
	if code := doAuth(t, "GET", s.url+"/api/users", viewer, &map[string]any{}); code != 403 {
		t.Fatalf("a viewer listing users: %d, want 403", code)
	}
	b := newBrowser(t)
	b.signIn(s.url, "admin@example.com", "first-password")
	b.do("open the Audit page from the header",
		until(`!document.querySelector('#nav-audit').hidden`),
		chromedp.Click(chromedp.CSS(`#nav-audit`)),
		until(`[...document.querySelectorAll('main td code')].some((c) => c.textContent === 'GET /api/users')`),
	)
	if !eval[bool](b, `[...document.querySelectorAll('main tr')].some((r) => r.textContent.includes('viewer@example.com') && r.textContent.includes('denied'))`) {
		t.Error("the refused request is not shown with its actor and outcome")
	}
	b.do("filter by action",
		chromedp.SetValue(chromedp.CSS(`input[name="action"]`), "auth."),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)),
		until(`location.search.includes('action=auth.')`),
		until(`(() => { const rows = [...document.querySelectorAll('main tr')].filter((r) => r.querySelector('td')); return rows.length > 0 && rows.every((r) => r.children[4].textContent.startsWith('auth.')); })()`),
	)
	b.signIn(s.url, "viewer@example.com", "viewer-password")
	if !eval[bool](b, `document.querySelector('#nav-audit').hidden`) {
		t.Error("the Audit link is offered to a user who is no admin")
	}
	b.do("open /audit as the viewer",
		chromedp.Navigate(s.url+"/audit"),
		until(`document.querySelector('main .error')?.textContent.includes('admins')`),
	)
}
