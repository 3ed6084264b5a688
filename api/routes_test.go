package api_test

import (
	"strings"
	"testing"
)

// A wrong method on a path served under other methods is a 405 naming the
// right ones, on every prefix, with or without the UI's catch-all; a path
// served under no method stays a 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	cases := []struct {
		method, path, allow string
		worker              bool
	}{
		{"DELETE", "/api/workspaces", "GET", false},
		{"POST", "/api/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10", "GET", false},
		{"GET", "/api/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10/cancel", "POST", false},
		{"PUT", "/api/workspaces/main/tasks/hello/execute", "POST", false},
		{"GET", "/worker/register", "POST", true},
		{"DELETE", "/worker/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10/cancelled", "GET", true},
		{"DELETE", "/hooks/some-hook", "GET, POST", false},
		{"POST", "/hooks/some-hook/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10", "GET", false},
	}
	for _, ui := range []bool{false, true} {
		var opts []fixtureOption
		if ui {
			opts = append(opts, withUI())
		}
		f := newFixture(t, opts...)
		for _, c := range cases {
			var r response
			if c.worker {
				r = f.worker(c.method, c.path, nil)
			} else {
				r = f.api(c.method, c.path, nil)
			}
			if r.status != 405 {
				t.Errorf("ui=%v %s %s: status %d, want 405 (body %s)", ui, c.method, c.path, r.status, r.body)
				continue
			}
			if got := r.header.Get("Allow"); got != c.allow {
				t.Errorf("ui=%v %s %s: Allow %q, want %q", ui, c.method, c.path, got, c.allow)
			}
			if !strings.Contains(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("ui=%v %s %s: not JSON: %q", ui, c.method, c.path, r.header.Get("Content-Type"))
			}
			want := "method not allowed on this endpoint: " + c.method + " " + c.path + " (allowed: " + c.allow + ")"
			if got := r.errorMessage(); got != want {
				t.Errorf("ui=%v %s %s: error %q, want %q", ui, c.method, c.path, got, want)
			}
		}
		for _, c := range []struct {
			method, path string
			worker       bool
		}{
			{"DELETE", "/api/nope", false},
			{"GET", "/api/workspaces/main/tasks/hello/nope", false},
			{"GET", "/worker/nope", true},
			{"POST", "/worker/jobs/x/y/z", true},
			{"GET", "/hooks/a/b/c/d", false},
		} {
			var r response
			if c.worker {
				r = f.worker(c.method, c.path, nil)
			} else {
				r = f.api(c.method, c.path, nil)
			}
			if r.status != 404 || r.header.Get("Allow") != "" {
				t.Errorf("ui=%v %s %s: status %d Allow %q, want 404 and none (body %s)", ui, c.method, c.path, r.status, r.header.Get("Allow"), r.body)
			}
		}
	}
}
