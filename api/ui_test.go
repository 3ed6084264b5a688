package api_test

import (
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/ui"
)

func withUI() fixtureOption { return func(c *fixtureConfig) { c.UI = ui.Handler() } }

func isIndexHTML(r response) bool {
	return strings.Contains(string(r.body), `<main id="main"`)
}

func TestUIAnswersEveryPathOutsideTheAPI(t *testing.T) {
	f := newFixture(t, withUI())
	for _, p := range []string{"/", "/jobs", "/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10", "/tasks/main/hello", "/workers", "/apiary", "/login/callback"} {
		r := f.api("GET", p, nil)
		if r.status != 200 || !isIndexHTML(r) {
			t.Errorf("GET %s: status %d, body %.80q", p, r.status, r.body)
		}
	}
}

func TestUIDoesNotSwallowAPIPaths(t *testing.T) {
	f := newFixture(t, withUI())
	cases := []struct {
		method, path string
		status       int
	}{
		{"GET", "/api", 404},
		{"GET", "/api/nope", 404},
		{"POST", "/api/nope", 404},
		{"DELETE", "/api/jobs/0b8e6a9e-5a3b-4f55-9c39-2f7d1c1b2a10", 0},
		{"GET", "/hooks", 404},
		{"GET", "/hooks/no-such-hook", 404},
		{"GET", "/worker", 0},
		{"GET", "/worker/nope", 0},
		{"GET", "/healthz/x", 404},
		{"GET", "/healthz", 200},
		{"GET", "/readyz", 200},
		{"GET", "/readyz/x", 404},
		{"GET", "/metrics", 404}, // no Metrics handler in this fixture
		{"GET", "/api/config", 200},
	}
	for _, c := range cases {
		r := f.api(c.method, c.path, nil)
		if isIndexHTML(r) {
			t.Errorf("%s %s: answered by the UI", c.method, c.path)
			continue
		}
		if c.status != 0 && r.status != c.status {
			t.Errorf("%s %s: status %d, want %d (body %s)", c.method, c.path, r.status, c.status, r.body)
		}
		if r.status >= 400 && !strings.Contains(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: error %d is %q, not JSON", c.method, c.path, r.status, r.header.Get("Content-Type"))
		}
	}
}

func TestWithoutAUIUnknownPathsAre404(t *testing.T) {
	f := newFixture(t)
	if r := f.api("GET", "/jobs", nil); r.status != 404 {
		t.Errorf("GET /jobs without a UI: status %d", r.status)
	}
}
