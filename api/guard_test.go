package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const executePath = "/api/workspaces/main/tasks/hello/execute"

// jobCount is how many jobs the server holds.
func (f *fixture) jobCount() float64 {
	f.t.Helper()
	n, _ := f.api("GET", "/api/jobs", nil).expect(200).object()["total"].(float64)
	return n
}

// An HTML form on any web page can post to the API: the browser sends it
// with the user's network position, so with auth off it would run a task.
// Forms can only send urlencoded, multipart or text/plain bodies.
func TestCrossSiteFormPostsCreateNoJob(t *testing.T) {
	f := newFixture(t)
	jsonish := `{"input": {"name": "mallory"}}`
	cases := []struct {
		name   string
		header map[string]string
		body   string
		status int
		want   string
	}{
		{"urlencoded form from another site", map[string]string{
			"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site",
		}, "input=x", 403, `cross-origin request from "http://evil.example" refused`},
		{"text/plain form carrying JSON from another site", map[string]string{
			"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site",
		}, jsonish, 403, "cross-origin"},
		// Without the Origin check, the body check alone still holds.
		{"urlencoded form without an Origin", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "input=x", 415, "request body must be JSON"},
		{"text/plain form without an Origin", map[string]string{"Content-Type": "text/plain"}, jsonish, 415, "got text/plain"},
		{"multipart form", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, "--x--", 415, "must be JSON"},
		{"a form with no fields", map[string]string{"Content-Type": "text/plain"}, "", 415, "must be JSON"},
		{"JSON without a Content-Type", map[string]string{"Content-Type": ""}, jsonish, 415, "got none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.in(t).do("POST", executePath, c.body, c.header).expectError(c.status, c.want)
		})
	}
	if n := f.jobCount(); n != 0 {
		t.Fatalf("%v jobs created by refused requests", n)
	}
}

func TestCrossOriginFetchIsRefused(t *testing.T) {
	f := newFixture(t)
	id := f.execute("ada")
	body := map[string]any{"input": map[string]any{"name": "mallory"}}
	cases := []struct {
		name   string
		method string
		path   string
		header map[string]string
	}{
		{"JSON fetch with another Origin", "POST", executePath, map[string]string{"Origin": "http://evil.example"}},
		{"same host name, other port", "POST", executePath, map[string]string{"Origin": "http://127.0.0.1:1"}},
		{"opaque origin (sandboxed frame, file)", "POST", executePath, map[string]string{"Origin": "null"}},
		{"no Origin but Sec-Fetch-Site cross-site", "POST", executePath, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"no-cors cancel with no body", "POST", "/api/jobs/" + id + "/cancel", map[string]string{"Origin": "http://evil.example"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b any = body
			if strings.HasSuffix(c.path, "/cancel") {
				b = nil
			}
			f.in(t).do(c.method, c.path, b, c.header).expectError(403, "refused")
		})
	}
	if n := f.jobCount(); n != 1 {
		t.Fatalf("%v jobs, want only the first", n)
	}
	if st := f.jobStatus(id); st == "cancelled" {
		t.Fatalf("a cross-origin cancel went through")
	}
}

// DNS rebinding: evil.example resolves to 127.0.0.1 once its page has
// loaded, so the browser sends same-origin requests — with Host evil.example.
func TestRebindingHostIsRefusedEvenOnGet(t *testing.T) {
	f := newFixture(t)
	evil := map[string]string{"Host": "evil.example:8080"}
	for _, p := range []string{"/api/jobs", "/api/config", "/api/workspaces/main/tasks", "/api/nope"} {
		f.do("GET", p, nil, evil).expectError(421, `host "evil.example:8080" is not this server's name`)
	}
	f.do("POST", executePath, map[string]any{"input": map[string]any{"name": "x"}}, evil).expectError(421, "allowed_hosts")
	if n := f.jobCount(); n != 0 {
		t.Fatalf("%v jobs created through a rebound name", n)
	}
	// Loopback names and addresses pass on any port.
	for _, h := range []string{"localhost:9", "LOCALHOST", "127.0.0.1:8080", "127.1.2.3", "[::1]:80"} {
		f.do("GET", "/api/config", nil, map[string]string{"Host": h}).expect(200)
	}
	// Only /api: webhooks are called by other servers under any name, and
	// remote workers reach the server by its real name with their token.
	f.do("GET", "/healthz", nil, evil).expect(200)
	f.do("GET", "/hooks/no-such-hook", nil, evil).expect(404)
	f.do("POST", "/worker/register", map[string]any{"name": "w", "tags": []string{}, "want_secret": true},
		map[string]string{"Host": "appliance.internal:8080", "Authorization": "Bearer " + workerToken}).expect(200)
}

// Webhooks are called by other servers: any name, any origin, any body.
func TestWebhooksStayOpenToOtherOrigins(t *testing.T) {
	f := newHookFixture(t)
	f.do("POST", "/hooks/open", "name=x", map[string]string{
		"Host": "appliance.example.com", "Origin": "https://ci.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain",
	}).expect(200)
}

func TestSameOriginJSONFromTheUIWorks(t *testing.T) {
	f := newFixture(t)
	ui := map[string]string{"Origin": f.url, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json; charset=utf-8"}
	m := f.do("POST", executePath, map[string]any{"input": map[string]any{"name": "ada"}}, ui).expect(200).object()
	id, _ := m["job_id"].(string)
	// The UI's cancel sends no body and no Content-Type.
	f.do("POST", "/api/jobs/"+id+"/cancel", nil, map[string]string{"Origin": f.url, "Sec-Fetch-Site": "same-origin"}).expect(200)
	// A command-line client sends neither Origin nor Sec-Fetch-Site.
	f.execute("cli")
	if n := f.jobCount(); n != 2 {
		t.Fatalf("%v jobs, want 2", n)
	}
}

func TestAllowedHostsAndOriginsAreAdmitted(t *testing.T) {
	f := newFixture(t, func(c *fixtureConfig) {
		c.AllowedHosts = []string{"appliance.example.com", "alt.example.com:8443"}
		c.AllowedOrigins = []string{"https://ui.example.com", "http://ui.example.com:3000/"}
	})
	job := map[string]any{"input": map[string]any{"name": "ada"}}
	f.do("GET", "/api/config", nil, map[string]string{"Host": "appliance.example.com"}).expect(200)
	f.do("GET", "/api/config", nil, map[string]string{"Host": "APPLIANCE.example.com:443"}).expect(200)
	f.do("GET", "/api/config", nil, map[string]string{"Host": "alt.example.com:8443"}).expect(200)
	f.do("GET", "/api/config", nil, map[string]string{"Host": "alt.example.com:9999"}).expect(421)
	f.do("GET", "/api/config", nil, map[string]string{"Host": "evil.example.com"}).expect(421)

	// The public name's own pages (TLS ended at a proxy) are same-origin.
	f.do("POST", executePath, job, map[string]string{"Host": "appliance.example.com", "Origin": "https://appliance.example.com"}).expect(200)
	for _, origin := range []string{"https://ui.example.com", "http://ui.example.com:3000"} {
		r := f.do("POST", executePath, job, map[string]string{"Origin": origin, "Sec-Fetch-Site": "cross-site"}).expect(200)
		if got := r.header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("Access-Control-Allow-Origin %q, want %q", got, origin)
		}
	}
	// The browser asks before a JSON post from another origin.
	r := f.do("OPTIONS", executePath, nil, map[string]string{"Origin": "https://ui.example.com", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "content-type"}).expect(204)
	if !strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Content-Type") || r.header.Get("Access-Control-Allow-Origin") != "https://ui.example.com" {
		t.Errorf("preflight headers %v", r.header)
	}
	f.do("POST", executePath, job, map[string]string{"Origin": "http://ui.example.com"}).expectError(403, "allowed_origins")
	if n := f.jobCount(); n != 3 {
		t.Fatalf("%v jobs, want 3", n)
	}
}

// Any page may open a WebSocket to any address; the log stream must not
// hand another origin a job's log.
func TestLogStreamRefusesOtherOriginsWithJSON(t *testing.T) {
	f := newFixture(t, func(c *fixtureConfig) { c.AllowedOrigins = []string{"https://ui.example.com"} })
	id := f.execute("ada")
	url := "ws" + strings.TrimPrefix(f.url, "http") + "/api/jobs/" + id + "/logs/stream"
	dial := func(origin string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return websocket.Dial(ctx, url, dialOptions(http.Header{"Origin": {origin}}))
	}

	_, resp, err := dial("http://evil.example")
	if err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("cross-origin dial: err %v, response %v; want a 403", err, resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("403 Content-Type %q, want application/json", ct)
	}

	for _, origin := range []string{f.url, "https://ui.example.com"} {
		conn, _, err := dial(origin)
		if err != nil {
			t.Fatalf("dial from %s: %v", origin, err)
		}
		conn.CloseNow()
	}

	// A plain GET is no WebSocket: 426, as JSON.
	r := f.api("GET", "/api/jobs/"+id+"/logs/stream", nil)
	r.expectError(426, "WebSocket")
	if r.header.Get("Upgrade") != "websocket" {
		t.Errorf("426 without Upgrade: websocket")
	}
	// A handshake Accept itself refuses (bad version) is JSON as well.
	f.do("GET", "/api/jobs/"+id+"/logs/stream", nil, map[string]string{
		"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "8", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
	}).expectError(400, "version")
}

func TestEveryErrorIsJSON(t *testing.T) {
	f := newFixture(t, withUI(), func(c *fixtureConfig) { c.MaxRequestBody = 1 << 10 })
	big := strings.Repeat("x", 2<<10)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		header map[string]string
		status int
		want   string
	}{
		{"unknown api route", "GET", "/api/nope", nil, nil, 404, "no route"},
		{"unknown ui asset", "GET", "/assets/0123456789ab/nope.js", nil, nil, 404, "no such ui asset"},
		{"wrong method on the ui", "PUT", "/jobs", `{}`, nil, 405, "method not allowed"},
		{"body over the limit", "POST", executePath, `{"input":{"name":"` + big + `"}}`, nil, 413, "request body too large (limit 1KiB"},
		{"webhook body over the limit", "POST", "/hooks/incoming-hook?secret=s3cret", big, map[string]string{"Content-Type": "text/plain"}, 413, "limits.request_body"},
		{"not JSON", "POST", executePath, "name=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "must be JSON"},
		{"rebinding host", "GET", "/api/jobs", nil, map[string]string{"Host": "evil.example"}, 421, "allowed_hosts"},
		{"headers over 64 KB", "GET", "/api/jobs", nil, map[string]string{"X-Big": strings.Repeat("h", 65<<10)}, 431, "request headers too large"},
		{"headers over 64 KB on the ui", "GET", "/", nil, map[string]string{"Cookie": strings.Repeat("c", 65<<10)}, 431, "limit 64KiB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.in(t).do(c.method, c.path, c.body, c.header).expectError(c.status, c.want)
		})
	}
	// Without a UI, echo's own 405 is JSON as well.
	newFixture(t).api("DELETE", "/api/jobs", nil).expectError(405, "method not allowed")

	// A body without Content-Length is cut off while it is read.
	req, err := http.NewRequest("POST", f.url+executePath, struct{ *strings.Reader }{strings.NewReader(`{"input":{"name":"` + big + `"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || resp.ContentLength == 0 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("chunked body over the limit: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := f.jobCount(); n != 0 {
		t.Fatalf("%v jobs created by refused requests", n)
	}
}

func TestInvalidUTF8IsRefused(t *testing.T) {
	f := newFixture(t)
	f.api("POST", executePath, "{\"input\": {\"name\": \"\xff\xfe\"}}").expectError(400, "request body is not valid UTF-8 (first bad byte at offset 20)")
	f.api("POST", "/hooks/incoming-hook?secret=s3cret", "{\"name\": \"caf\xe9\"}").expectError(400, "not valid UTF-8")
	if n := f.jobCount(); n != 0 {
		t.Fatalf("%v jobs created from invalid UTF-8", n)
	}
	// Valid multi-byte text passes untouched.
	id := f.execute("Zoë 🙂")
	in, _ := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()["input"].(map[string]any)
	if in["name"] != "Zoë 🙂" {
		t.Fatalf("input name %q", in["name"])
	}
}

// A body must arrive within the body read timeout, and the deadline is
// lifted once it has: a long-poll that read its body keeps waiting.
func TestBodyReadTimeoutSparesLongPolls(t *testing.T) {
	f := newFixture(t, func(c *fixtureConfig) { c.BodyReadTimeout = 500 * time.Millisecond })
	wid := f.register("w")
	start := time.Now()
	if m := f.claim(wid, "2"); m != nil {
		t.Fatalf("claim got work %v", m)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("claim long-poll answered after %v, want the full 2s wait", d)
	}

	// A body that stalls half way is cut off.
	pr, pw := newStalledBody(`{"input": {"name": "slo`)
	defer pw.Close()
	req, err := http.NewRequest("POST", f.url+executePath, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	start = time.Now()
	resp, err := f.client.Do(req)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("stalled body: status %d, want 408: %s", resp.StatusCode, b)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("stalled body held the request %v", d)
	}
	if n := f.jobCount(); n != 0 {
		t.Fatalf("%v jobs from a body that never arrived", n)
	}
}

// newStalledBody is a request body that sends prefix and then nothing
// until the writer is closed.
func newStalledBody(prefix string) (*io.PipeReader, *io.PipeWriter) {
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte(prefix)) }()
	return pr, pw
}
