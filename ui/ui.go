// Package ui serves the embedded web UI: plain HTML, CSS and JavaScript
// modules with no build step, and index.html for every other path so the
// browser-side router can show it.
// It must not import any other package of the module.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// assetsPlaceholder in index.html becomes the versioned assets prefix.
const assetsPlaceholder = "{{assets}}"

// Handler returns the UI's handler. Paths under /assets/ are the static
// files; every other GET or HEAD answers index.html.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return failing(err)
	}
	h, err := newHandler(sub)
	if err != nil {
		return failing(err)
	}
	return h
}

// failing answers 500 on every request: the embedded files are fixed at
// build time, so this only happens to a broken build, which the tests catch.
func failing(err error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jsonError(w, http.StatusInternalServerError, "web ui unavailable: "+err.Error())
	})
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

type handler struct {
	// version names this build's assets: a hash of all of them. Asset URLs
	// carry it (/assets/<version>/...), so browsers may cache them forever
	// and a new build is fetched fresh; relative module imports keep it.
	version string
	assets  map[string]asset // by path under assets/
	index   asset
}

// newHandler reads index.html and assets/ from fsys.
func newHandler(fsys fs.FS) (*handler, error) {
	h := &handler{assets: map[string]asset{}}
	sum := sha256.New()
	var names []string
	err := fs.WalkDir(fsys, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list ui assets: %w", err)
	}
	sort.Strings(names)
	for _, p := range names {
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read ui asset: %w", err)
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", p, len(body))
		sum.Write(body)
		h.assets[strings.TrimPrefix(p, "assets/")] = newAsset(body, contentType(p))
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:12]

	index, err := fs.ReadFile(fsys, "index.html")
	if err != nil {
		return nil, fmt.Errorf("read ui index: %w", err)
	}
	index = bytes.ReplaceAll(index, []byte(assetsPlaceholder), []byte("/assets/"+h.version))
	h.index = newAsset(index, "text/html; charset=utf-8")
	return h, nil
}

func newAsset(body []byte, ctype string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, contentType: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// contentTypes are set explicitly: the system's MIME table varies between
// machines, and a module script served as anything but JavaScript is
// refused by the browser.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

func contentType(name string) string {
	if t, ok := contentTypes[path.Ext(name)]; ok {
		return t
	}
	return "application/octet-stream"
}

// contentSecurityPolicy allows only this origin's scripts, styles,
// images and connections (WebSockets back to it included), nothing inline,
// no plugins, no <base>, and no framing (clickjacking). The UI builds its
// DOM from data without markup (js/dom.js), so it needs nothing more.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer, assets and errors included: a file served as the
	// wrong type or shown in a frame is an attack surface as well.
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		jsonError(w, http.StatusMethodNotAllowed, "method not allowed: the web UI answers GET and HEAD")
		return
	}
	p := path.Clean("/" + r.URL.Path)
	if p == "/assets" || strings.HasPrefix(p, "/assets/") {
		h.serveAsset(w, r, strings.TrimPrefix(strings.TrimPrefix(p, "/assets"), "/"))
		return
	}
	// index.html names this build's assets, so it must be revalidated.
	w.Header().Set("Cache-Control", "no-cache")
	serve(w, r, h.index)
}

// jsonError answers {"error": msg}, like every error of the server.
func jsonError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// serveAsset serves /assets/<version>/<name>.
func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, rest string) {
	version, name, _ := strings.Cut(rest, "/")
	a, ok := h.assets[name]
	if !ok {
		// Never index.html here: a browser would try to run it as a script.
		jsonError(w, http.StatusNotFound, "no such ui asset: "+name)
		return
	}
	if version == h.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A page from an older build asking for its files gets this
		// build's, which must not be cached under the old name.
		w.Header().Set("Cache-Control", "no-cache")
	}
	serve(w, r, a)
}

func serve(w http.ResponseWriter, r *http.Request, a asset) {
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	// A zero modtime leaves revalidation to the ETag.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
