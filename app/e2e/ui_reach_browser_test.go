package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// named are the roles of controls that need an accessible name.
var named = []string{"button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "listbox", "menuitem", "switch", "spinbutton"}

// landmarks every page has: the header, its navigation and the main part.
var landmarks = []string{"banner", "navigation", "main"}

// checkAXTree reads the page's accessibility tree from Chromium: every
// control has a name, and the landmarks are there.
func (b *browser) checkAXTree(page string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.Action[*accessibility.GetFullAXTreeResult](func(ctx context.Context, _ *chromedp.Target) (*accessibility.GetFullAXTreeResult, error) {
		r, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
		return &r, err
	}))
	if err != nil {
		b.t.Fatalf("%s: accessibility tree: %v", page, err)
	}
	str := func(v *accessibility.Value) string {
		if v == nil || len(v.Value) == 0 {
			return ""
		}
		var s any
		if json.Unmarshal(v.Value, &s) != nil {
			return ""
		}
		if t, ok := s.(string); ok {
			return strings.TrimSpace(t)
		}
		return ""
	}
	roles := map[string]int{}
	controls := 0
	defer func() { b.t.Logf("%s: %d controls", page, controls) }()
	for _, n := range res.Nodes {
		if n.Ignored {
			continue
		}
		role := str(n.Role)
		roles[role]++
		if !slices.Contains(named, role) {
			continue
		}
		controls++
		if str(n.Name) == "" {
			b.t.Errorf("%s: a %s has no accessible name: %s", page, role, b.outerHTML(n.BackendDOMNodeID))
		}
	}
	for _, l := range landmarks {
		if roles[l] == 0 {
			b.t.Errorf("%s: no %s landmark (roles: %v)", page, l, roles)
		}
	}
	if controls == 0 {
		b.t.Errorf("%s: no controls in the accessibility tree: %v", page, roles)
	}
}

// outerHTML is a node's markup, cut short, to say which one a failure means.
func (b *browser) outerHTML(id cdp.BackendNodeID) string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	html, err := chromedp.Run(ctx, chromedp.Action[string](func(ctx context.Context, _ *chromedp.Target) (string, error) {
		r, err := chromedp.Call(ctx, dom.GetOuterHTML, dom.GetOuterHTMLParams{BackendNodeID: id})
		return r.OuterHTML, err
	}))
	if err != nil {
		return err.Error()
	}
	if len(html) > 200 {
		html = html[:200] + "…"
	}
	return html
}

// fitsWidth checks the page does not scroll sideways.
func (b *browser) fitsWidth(page string) {
	b.t.Helper()
	var w struct {
		Scroll, Inner int
		Wide          string
	}
	b.eval(`(() => {
		const wide = [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > innerWidth + 1 && !e.parentElement?.closest('.log, svg, table, pre'))
			.slice(0, 3).map((e) => e.tagName + '.' + e.className).join(', ');
		return {scroll: document.scrollingElement.scrollWidth, inner: innerWidth, wide};
	})()`, &w)
	b.t.Logf("%s: %d px wide in a %d px window", page, w.Scroll, w.Inner)
	if w.Inner != 375 {
		b.t.Errorf("%s: the window is %d px wide, not a phone's 375", page, w.Inner)
	}
	if w.Scroll > w.Inner {
		b.screenshot("wide-" + strings.ReplaceAll(page, "/", "-"))
		b.t.Errorf("%s at %d px: the page is %d px wide (%s)", page, w.Inner, w.Scroll, w.Wide)
	}
}

// TestBrowserEveryPageFitsAPhoneAndNamesEveryControl opens every page at
// 375 px wide: none scrolls sideways, and Chromium's accessibility tree
// names every control and has the header, navigation and main landmarks.
func TestBrowserEveryPageFitsAPhoneAndNamesEveryControl(t *testing.T) {
	b := newBrowser(t)
	ws := t.TempDir()
	writeWorkspace(t, ws, logWorkflow)
	f := startFixture(t, map[string]string{"main": ws, "examples": "../../examples"}, 1)
	id := f.execute("main", "noisy", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %s", id, j.Status)
	}
	b.do("a phone's screen", chromedp.EmulateViewport(375, 812))
	var workers struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	do(t, "GET", f.url+"/api/workers", nil, &workers)
	if len(workers.Items) == 0 {
		t.Fatal("no worker")
	}
	pages := []struct{ path, ready string }{
		{"/", present(`a[href="/tasks/examples/hello-world"]`)},
		{"/jobs", present(`a[href="/jobs/` + id + `"]`)},
		{"/jobs/" + id, `document.querySelector('.log')?.innerText.includes('other complains') && ` + present(`svg.dag`)},
		{"/tasks/main/noisy", present(`form.run-form button[type="submit"]`)},
		{"/tasks/examples/hello-world", present(`form.run-form input[name="name"]`)},
		{"/workers", present(`main a[href^="/workers/"]`)},
		{"/workers/" + workers.Items[0].ID, `document.body.innerText.includes('Recent steps')`},
	}
	for _, p := range pages {
		b.do("open "+p.path, chromedp.Navigate(f.url+p.path), until(p.ready))
		b.fitsWidth(p.path)
		b.checkAXTree(p.path)
	}
	b.do("back to the job", chromedp.Navigate(f.url+"/jobs/"+id), until(present(`.log .line`)))
	b.screenshot("phone-job")

	// The account pages of an auth-on server, and its login page.
	s := startACLServer(t)
	b.do("open the login page", chromedp.Navigate(s.url+"/login"), until(present(`#login-email`)))
	b.fitsWidth("/login")
	b.checkAXTree("/login")
	b.signIn(s.url, "admin@example.com", "first-password")
	for _, p := range []struct{ path, ready string }{
		{"/", present(`a[href="/tasks/main/hello"]`)},
		{"/admin", `document.body.innerText.includes('admin@example.com')`},
		{"/account/password", present(`main form input[type="password"]`)},
		{"/account/api-keys", present(`main form`)},
	} {
		b.do("open "+p.path, chromedp.Navigate(s.url+p.path), until(p.ready))
		b.fitsWidth(p.path + " (signed in)")
		b.checkAXTree(p.path + " (signed in)")
	}
}

// TestBrowserKeyboardReachesTheSkipLinkFirst: the first Tab shows the skip
// link, and following it puts the focus on the page's main part.
func TestBrowserKeyboardReachesTheSkipLinkFirst(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 1)
	b.do("open the dashboard and press Tab",
		chromedp.Navigate(f.url+"/"),
		until(present(`a[href="/tasks/examples/hello-world"]`)),
		chromedp.KeyEvent(kb.Tab),
		until(`document.activeElement.matches('a.skip:focus-visible') && document.activeElement.getBoundingClientRect().left >= 0`),
	)
	var outline string
	b.eval(`getComputedStyle(document.activeElement).outlineStyle`, &outline)
	if outline == "none" {
		t.Errorf("the focused skip link has no visible outline")
	}
	b.do("follow it", chromedp.KeyEvent(kb.Enter), until(`document.activeElement.id === 'main'`))
	b.do("tab on into the page",
		chromedp.KeyEvent(kb.Tab),
		until(`document.activeElement.closest('main') !== null && document.activeElement.matches(':focus-visible')`),
	)
}

// TestBrowserThemeSwitchIsRemembered switches the colour theme from the
// header: the page's colours change, and stay after a reload.
func TestBrowserThemeSwitchIsRemembered(t *testing.T) {
	b := newBrowser(t)
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 1)
	b.darkMode(false)
	bg := func() string { return eval[string](b, `getComputedStyle(document.documentElement).backgroundColor`) }
	b.do("open the dashboard", chromedp.Navigate(f.url+"/"), until(present(`a[href="/tasks/examples/hello-world"]`)))
	light := bg()
	if label := eval[string](b, `document.querySelector('#theme').textContent`); label != "Auto" {
		t.Errorf("the theme starts as %q", label)
	}
	b.do("pick light, then dark",
		chromedp.Click(chromedp.CSS(`#theme`)),
		until(`document.querySelector('#theme').textContent === 'Light' && document.documentElement.dataset.theme === 'light'`),
		chromedp.Click(chromedp.CSS(`#theme`)),
		until(`document.querySelector('#theme').textContent === 'Dark' && getComputedStyle(document.documentElement).backgroundColor !== `+jsQuote(light)),
	)
	dark := bg()
	if dark != "rgb(12, 17, 29)" || light != "rgb(246, 247, 249)" {
		t.Errorf("light %s, dark %s", light, dark)
	}
	if name := eval[string](b, `document.querySelector('#theme').getAttribute('aria-label')`); name != "Theme: Dark (switch to Auto)" {
		t.Errorf("the switch is named %q", name)
	}
	b.do("reload", chromedp.Reload(), until(present(`a[href="/tasks/examples/hello-world"]`)))
	if got := bg(); got != dark || b.localStorage("appliance.theme") != "dark" {
		t.Errorf("after a reload: background %s, stored %q", got, b.localStorage("appliance.theme"))
	}
	// Dark chosen holds against a light system; system follows it again.
	b.do("back to the system's", chromedp.Click(chromedp.CSS(`#theme`)), until(`document.querySelector('#theme').textContent === 'Auto'`))
	if got := bg(); got != light {
		t.Errorf("system theme on a light system: %s", got)
	}
	b.darkMode(true)
	b.do("the system turns dark", until(`getComputedStyle(document.documentElement).backgroundColor === `+jsQuote(dark)))
	b.do("pick light on a dark system",
		chromedp.Click(chromedp.CSS(`#theme`)),
		until(`getComputedStyle(document.documentElement).backgroundColor === `+jsQuote(light)),
	)
}
