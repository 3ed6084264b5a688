package ui

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// get serves one request through the embedded UI.
func get(t *testing.T, h http.Handler, method, target string, header map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assetURL finds the versioned URL of an asset in index.html.
func assetURL(t *testing.T, index, name string) string {
	t.Helper()
	m := regexp.MustCompile(`"(/assets/[0-9a-f]{12}/` + regexp.QuoteMeta(name) + `)"`).FindStringSubmatch(index)
	if m == nil {
		t.Fatalf("index.html does not reference %s:\n%s", name, index)
	}
	return m[1]
}

func TestIndexIsServedAtRootAndAtEveryAppPath(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/jobs", "/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10", "/tasks/examples/hello-world",
		"/login/callback", "/no/such/page", "/favicon.ico"} {
		t.Run(p, func(t *testing.T) {
			r := get(t, h, "GET", p, nil)
			if r.StatusCode != 200 {
				t.Fatalf("status %d", r.StatusCode)
			}
			if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := r.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control %q: index.html names the assets of a build and must be revalidated", cc)
			}
			if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			b := body(t, r)
			if !strings.Contains(b, `<main id="main"`) || strings.Contains(b, assetsPlaceholder) {
				t.Errorf("not the rendered index.html:\n%s", b)
			}
		})
	}
}

func TestAssetsHaveTheirContentTypesAndAreCachedByVersion(t *testing.T) {
	h := Handler()
	index := body(t, get(t, h, "GET", "/", nil))
	cases := []struct{ name, contentType, contains string }{
		{"js/app.js", "text/javascript; charset=utf-8", "import"},
		{"style.css", "text/css; charset=utf-8", ":root"},
		{"favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := assetURL(t, index, c.name)
			r := get(t, h, "GET", url, nil)
			if r.StatusCode != 200 {
				t.Fatalf("GET %s: status %d", url, r.StatusCode)
			}
			if ct := r.Header.Get("Content-Type"); ct != c.contentType {
				t.Errorf("Content-Type %q, want %q", ct, c.contentType)
			}
			if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control %q", cc)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
			if !strings.Contains(body(t, r), c.contains) {
				t.Errorf("body lacks %q", c.contains)
			}
		})
	}
}

func TestModulesImportedByOtherModulesAreServedUnderTheSameVersion(t *testing.T) {
	h := Handler()
	app := assetURL(t, body(t, get(t, h, "GET", "/", nil)), "js/app.js")
	dir := strings.TrimSuffix(app, "app.js")
	r := get(t, h, "GET", dir+"pages/job.js", nil)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("GET %spages/job.js: %d %q", dir, r.StatusCode, r.Header.Get("Content-Type"))
	}
}

func TestAnAssetOfAnotherBuildIsServedButNotCachedForever(t *testing.T) {
	r := get(t, Handler(), "GET", "/assets/000000000000/style.css", nil)
	if r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q", cc)
	}
}

func TestAMissingAssetIsA404NotIndexHTML(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/assets/000000000000/nope.js", "/assets/", "/assets/x", "/assets/../assets/v/nope.css"} {
		r := get(t, h, "GET", p, nil)
		b := body(t, r)
		if r.StatusCode != 404 || strings.Contains(b, "<html") {
			t.Errorf("GET %s: status %d, body %.60q", p, r.StatusCode, b)
		}
	}
}

// Every answer carries the security headers, and errors are JSON like the
// rest of the server's.
func TestEveryAnswerCarriesTheSecurityHeaders(t *testing.T) {
	const csp = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
	h := Handler()
	app := assetURL(t, body(t, get(t, h, "GET", "/", nil)), "js/app.js")
	cases := []struct {
		method, path string
		status       int
	}{
		{"GET", "/", 200},
		{"GET", "/jobs/x", 200},
		{"GET", app, 200},
		{"GET", "/assets/000000000000/nope.js", 404},
		{"POST", "/", 405},
	}
	for _, c := range cases {
		r := get(t, h, c.method, c.path, nil)
		if r.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d", c.method, c.path, r.StatusCode, c.status)
		}
		for k, want := range map[string]string{"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s %s: %s %q, want %q", c.method, c.path, k, got, want)
			}
		}
		if c.status >= 400 {
			b := body(t, r)
			if r.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(b, `{"error":"`) {
				t.Errorf("%s %s: error answer %q %q, want a JSON error", c.method, c.path, r.Header.Get("Content-Type"), b)
			}
		}
	}
}

func TestUnchangedAssetAnswers304ToItsETag(t *testing.T) {
	h := Handler()
	url := assetURL(t, body(t, get(t, h, "GET", "/", nil)), "style.css")
	etag := get(t, h, "GET", url, nil).Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	if r := get(t, h, "GET", url, map[string]string{"If-None-Match": etag}); r.StatusCode != http.StatusNotModified {
		t.Errorf("status %d, want 304", r.StatusCode)
	}
}

func TestHeadAnswersWithoutABodyAndOtherMethodsAreRefused(t *testing.T) {
	h := Handler()
	r := get(t, h, "HEAD", "/jobs", nil)
	if r.StatusCode != 200 || body(t, r) != "" {
		t.Errorf("HEAD: status %d", r.StatusCode)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		r := get(t, h, m, "/", nil)
		if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: status %d, Allow %q", m, r.StatusCode, r.Header.Get("Allow"))
		}
	}
}

// Every relative import of every module must name an embedded file: a
// broken import only shows in a browser, as a blank page.
func TestEveryModuleImportResolvesToAnEmbeddedFile(t *testing.T) {
	sub, err := fs.Sub(static, "static/assets")
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?m)^\s*import\s+(?:[^'"]*?\s+from\s+)?['"]([^'"]+)['"]`)
	checked := 0
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		for _, m := range imports.FindAllStringSubmatch(string(src), -1) {
			target := m[1]
			if !strings.HasPrefix(target, "./") && !strings.HasPrefix(target, "../") {
				t.Errorf("%s imports %q: only relative imports work without a build step", p, target)
				continue
			}
			resolved := pathJoin(p, target)
			if _, err := fs.Stat(sub, resolved); err != nil {
				t.Errorf("%s imports %q: %s is not embedded", p, target, resolved)
			}
			checked++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d imports; the pattern no longer matches the modules", checked)
	}
}

// No module builds markup from strings: every value reaches the DOM as
// text, so data can never become HTML.
func TestNoModuleParsesMarkup(t *testing.T) {
	sub, err := fs.Sub(static, "static/assets")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function`)
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		if m := forbidden.Find(src); m != nil {
			t.Errorf("%s uses %s", p, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestABrokenBuildFailsRequestsWithA500InsteadOfPanicking(t *testing.T) {
	if _, err := newHandler(fstest.MapFS{"assets/app.js": {Data: []byte("x")}}); err == nil {
		t.Fatal("newHandler without index.html: no error")
	}
	r := get(t, failing(io.ErrUnexpectedEOF), "GET", "/", nil)
	if r.StatusCode != 500 {
		t.Errorf("status %d", r.StatusCode)
	}
}

func pathJoin(from, rel string) string {
	return path.Join(path.Dir(from), rel)
}

// The vendored dagre is the Debian package's file, byte for byte, as its
// README says: anyone can check it against the package.
func TestVendoredDagreIsTheDebianFile(t *testing.T) {
	js, err := fs.ReadFile(static, "static/assets/vendor/dagre.min.js")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := fs.ReadFile(static, "static/assets/vendor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(js)
	if want := "sha256: `" + hex.EncodeToString(sum[:]) + "`"; !strings.Contains(string(readme), want) {
		t.Errorf("vendor/README.md does not record the file's %s", want)
	}
	if !strings.Contains(string(readme), "0.8.8+really0.8.5+dfsg-6") || !strings.Contains(string(js), `version:"0.8.5"`) {
		t.Error("vendor/README.md and dagre.min.js disagree on the version")
	}
	index := body(t, get(t, Handler(), "GET", "/", nil))
	// A classic script before the module: the module finds the global.
	if i, j := strings.Index(index, "vendor/dagre.min.js"), strings.Index(index, "js/app.js"); i < 0 || i > j {
		t.Errorf("index.html must load vendor/dagre.min.js before js/app.js:\n%s", index)
	}
}

// The vendored ansi_up is the Debian package's file, byte for byte, loaded
// as a classic script before the modules that use its global.
func TestVendoredAnsiUpIsTheDebianFile(t *testing.T) {
	js, err := fs.ReadFile(static, "static/assets/vendor/ansi_up.js")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := fs.ReadFile(static, "static/assets/vendor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(js)
	if want := "sha256: `" + hex.EncodeToString(sum[:]) + "`"; !strings.Contains(string(readme), want) {
		t.Errorf("vendor/README.md does not record ansi_up.js's %s", want)
	}
	if !strings.Contains(string(readme), "5.1.0+dfsg-2") || !strings.Contains(string(js), `this.VERSION = "5.1.0"`) {
		t.Error("vendor/README.md and ansi_up.js disagree on the version")
	}
	index := body(t, get(t, Handler(), "GET", "/", nil))
	if i, j := strings.Index(index, "vendor/ansi_up.js"), strings.Index(index, "js/app.js"); i < 0 || i > j {
		t.Errorf("index.html must load vendor/ansi_up.js before js/app.js:\n%s", index)
	}
}
