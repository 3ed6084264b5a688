package api_test

import (
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// hooksWorkflow is the webhook tests' own workspace, "beta".
const hooksWorkflow = `
tasks:
  echo:
    input:
      extra: {type: string, default: from task}
      fill: {type: string, default: filled by the task}
    flow:
      run: {type: script, script: "true"}
  needs-name:
    input:
      name: {type: string, required: true}
    flow:
      run: {type: script, script: "true"}
  b:
    flow:
      run: {type: script, script: "true"}
triggers:
  open:
    type: webhook
    name: open
    task: echo
    input: {body: not the body, method: PUT, headers: {}, query: {}, extra: from trigger, note: from trigger}
  locked: {type: webhook, name: locked, task: echo, secret: s3cret}
  sync: {type: webhook, name: sync, task: echo, mode: sync}
  quick: {type: webhook, name: quick, task: echo, mode: sync, timeout_secs: 1}
  off: {type: webhook, name: off, task: echo, enabled: false}
  strict: {type: webhook, name: strict, task: needs-name}
  other: {type: webhook, name: other, task: echo}
  dup: {type: webhook, name: dup, task: b}
  half: {type: webhook, name: half, task: b}
`

// alphaWorkflow comes first by name: its dup wins, its half is disabled.
const alphaWorkflow = `
tasks:
  a:
    flow:
      run: {type: script, script: "true"}
triggers:
  dup: {type: webhook, name: dup, task: a}
  half: {type: webhook, name: half, task: a, enabled: false}
`

// newHookFixture is newFixture over the webhook tests' workspaces: a real
// engine on a bbolt file, real logs and a real HTTP server.
func newHookFixture(t *testing.T) *fixture {
	t.Helper()
	tmp := t.TempDir()
	dirs := map[string]string{"alpha": filepath.Join(tmp, "alpha"), "beta": filepath.Join(tmp, "beta")}
	writeFile(t, filepath.Join(dirs["alpha"], ".workflows", "main.yaml"), alphaWorkflow, 0o644)
	writeFile(t, filepath.Join(dirs["beta"], ".workflows", "main.yaml"), hooksWorkflow, 0o644)
	f := startAPI(t, tmp, dirs)
	for _, ws := range f.api("GET", "/api/workspaces", nil).expect(200).array() {
		if ws["errors"] != nil {
			t.Fatalf("workspace %v: %v", ws["name"], ws["errors"])
		}
	}
	f.wsDir = dirs["beta"]
	return f
}

// hook sends a request with a raw body, a content type and headers that may
// repeat; it is safe to call from any goroutine (it never fails the test).
func (f *fixture) hook(method, path, contentType, body string, header http.Header) (response, error) {
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{t: f.t, status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// mustHook is hook for the test goroutine.
func (f *fixture) mustHook(method, path, contentType, body string, header http.Header) response {
	f.t.Helper()
	r, err := f.hook(method, path, contentType, body, header)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// hookJob reads a job's detail, checking it came from the webhook.
func (f *fixture) hookJob(id, wantSource string) map[string]any {
	f.t.Helper()
	m := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	if m["source_type"] != "webhook" || m["source_id"] != wantSource {
		f.t.Fatalf("job %s source = %v %v, want webhook %s", id, m["source_type"], m["source_id"], wantSource)
	}
	return m
}

func TestWebhookAsyncCallAnswersAtOnceWithTheNewJob(t *testing.T) {
	f := newHookFixture(t)
	m := f.mustHook("POST", "/hooks/open", "application/json", `{"a": 1}`, nil).expect(200).object()
	assertKeys(t, "async answer", m, "job_id", "trigger", "task")
	if m["trigger"] != "open" || m["task"] != "echo" {
		t.Fatalf("answer = %v", m)
	}
	job := f.hookJob(m["job_id"].(string), "open")
	if job["workspace"] != "beta" || job["task_name"] != "echo" || job["status"] != "pending" {
		t.Fatalf("job = %v", job)
	}
}

func TestWebhookInputIsBuiltFromTheRequest(t *testing.T) {
	f := newHookFixture(t)
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		header      http.Header
		check       func(t *testing.T, in map[string]any)
	}{
		{
			name: "json body is parsed", method: "POST", path: "/hooks/open",
			contentType: "application/json; charset=utf-8", body: `{"a": [1, "x"], "b": {"c": null}}`,
			check: func(t *testing.T, in map[string]any) {
				want := map[string]any{"a": []any{1.0, "x"}, "b": map[string]any{"c": nil}}
				if !reflect.DeepEqual(in["body"], want) || in["method"] != "POST" {
					t.Errorf("body = %#v, method %v; want %v and POST", in["body"], in["method"], want)
				}
			},
		},
		{
			name: "other content types are raw text", method: "POST", path: "/hooks/open",
			contentType: "text/plain", body: "hello {not json",
			check: func(t *testing.T, in map[string]any) {
				if in["body"] != "hello {not json" {
					t.Errorf("body = %#v, want the raw text", in["body"])
				}
			},
		},
		{
			name: "get has a null body", method: "GET", path: "/hooks/open?x=1",
			check: func(t *testing.T, in map[string]any) {
				if v, ok := in["body"]; !ok || v != nil || in["method"] != "GET" {
					t.Errorf("body = %#v (present %v), method %v; want null and GET", v, ok, in["method"])
				}
			},
		},
		{
			name: "headers have lowercase names and repeated ones are arrays", method: "POST", path: "/hooks/open",
			contentType: "text/plain", body: "x",
			header: http.Header{"X-Github-Event": {"push"}, "X-Multi": {"a", "b"}},
			check: func(t *testing.T, in map[string]any) {
				h := in["headers"].(map[string]any)
				if h["x-github-event"] != "push" || !reflect.DeepEqual(h["x-multi"], []any{"a", "b"}) ||
					h["content-type"] != "text/plain" || h["host"] == nil {
					t.Errorf("headers = %v", h)
				}
				for k := range h {
					if k != strings.ToLower(k) {
						t.Errorf("header name %q is not lowercase", k)
					}
				}
			},
		},
		{
			name: "query leaves out the secret", method: "POST", path: "/hooks/open?ref=main&tag=a&tag=b&secret=zzz",
			check: func(t *testing.T, in map[string]any) {
				want := map[string]any{"ref": "main", "tag": []any{"a", "b"}}
				if !reflect.DeepEqual(in["query"], want) {
					t.Errorf("query = %v, want %v", in["query"], want)
				}
			},
		},
		{
			name: "trigger defaults never overwrite the request's keys", method: "POST", path: "/hooks/open",
			contentType: "application/json", body: `"the body"`,
			check: func(t *testing.T, in map[string]any) {
				if in["body"] != "the body" || in["method"] != "POST" || in["note"] != "from trigger" ||
					in["extra"] != "from trigger" || in["fill"] != "filled by the task" {
					t.Errorf("input = %v", in)
				}
				if h := in["headers"].(map[string]any); len(h) == 0 {
					t.Errorf("headers were overwritten by the trigger's {}: %v", h)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.in(t)
			m := f.mustHook(tt.method, tt.path, tt.contentType, tt.body, tt.header).expect(200).object()
			job := f.hookJob(m["job_id"].(string), "open")
			in := job["input"].(map[string]any)
			assertKeysInclude(t, in, "body", "headers", "method", "query")
			tt.check(t, in)
		})
	}
}

func assertKeysInclude(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Fatalf("input %v lacks %q", m, k)
		}
	}
}

func TestWebhookRefusesBadCalls(t *testing.T) {
	f := newHookFixture(t)
	tests := []struct {
		name   string
		method string
		path   string
		ctype  string
		body   string
		status int
		want   string
	}{
		{"invalid json body", "POST", "/hooks/open", "application/json", `{"a":`, 400, "malformed JSON"},
		{"trailing data after json", "POST", "/hooks/open", "application/json", `{} {}`, 400, "malformed JSON"},
		{"missing required task input", "POST", "/hooks/strict", "application/json", `{}`, 400, `input "name"`},
		{"invalid utf-8 in a json body", "POST", "/hooks/open", "application/json", "{\"a\": \"caf\xe9\"}", 400, "not valid UTF-8 (first bad byte at offset 10)"},
		{"invalid utf-8 in a text body", "POST", "/hooks/open", "text/plain", "ok \xc3\x28", 400, "not valid UTF-8"},
		{"unknown webhook", "POST", "/hooks/nope", "", "", 404, `webhook "nope"`},
		{"disabled webhook", "POST", "/hooks/off", "", "", 404, `webhook "off"`},
		{"disabled webhook on get", "GET", "/hooks/off", "", "", 404, `webhook "off"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).mustHook(tt.method, tt.path, tt.ctype, tt.body, nil).expectError(tt.status, tt.want)
		})
	}
}

func TestWebhookSecretComesByQueryOrBearer(t *testing.T) {
	f := newHookFixture(t)
	tests := []struct {
		name   string
		path   string
		auth   string
		status int
	}{
		{"no secret", "/hooks/locked", "", 401},
		{"wrong query secret", "/hooks/locked?secret=s3cre", "", 401},
		{"wrong bearer", "/hooks/locked", "Bearer s3cret!", 401},
		{"basic auth is not a bearer", "/hooks/locked", "Basic s3cret", 401},
		{"query secret", "/hooks/locked?secret=s3cret", "", 200},
		{"bearer secret", "/hooks/locked", "Bearer s3cret", 200},
		{"a right secret wins over a wrong one", "/hooks/locked?secret=nope", "Bearer s3cret", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := f.in(t)
			h := http.Header{}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			r := f.mustHook("POST", tt.path, "text/plain", "x", h)
			if tt.status == 401 {
				r.expectError(401, "webhook secret")
				return
			}
			job := f.hookJob(r.expect(200).object()["job_id"].(string), "locked")
			in := job["input"].(map[string]any)
			if _, leaked := in["headers"].(map[string]any)["authorization"]; leaked {
				t.Errorf("the Authorization header carrying the secret is in the job input")
			}
			if _, leaked := in["query"].(map[string]any)["secret"]; leaked {
				t.Errorf("the secret query parameter is in the job input")
			}
		})
	}
}

func TestWebhookFirstWorkspaceByNameWins(t *testing.T) {
	f := newHookFixture(t)
	m := f.mustHook("POST", "/hooks/dup", "", "", nil).expect(200).object()
	if m["task"] != "a" || f.hookJob(m["job_id"].(string), "dup")["workspace"] != "alpha" {
		t.Errorf("dup went to %v, want alpha's task a", m)
	}
	// A disabled trigger is no match: the next workspace's enabled one is.
	m = f.mustHook("POST", "/hooks/half", "", "", nil).expect(200).object()
	if m["task"] != "b" || f.hookJob(m["job_id"].(string), "half")["workspace"] != "beta" {
		t.Errorf("half went to %v, want beta's task b", m)
	}
}

// syncCall is a sync webhook call made in the background.
type syncCall struct {
	r   response
	err error
}

func (f *fixture) goHook(method, path string) <-chan syncCall {
	out := make(chan syncCall, 1)
	go func() {
		r, err := f.hook(method, path, "application/json", `{"n": 1}`, nil)
		out <- syncCall{r, err}
	}()
	return out
}

func await(t *testing.T, c <-chan syncCall) response {
	t.Helper()
	select {
	case res := <-c:
		if res.err != nil {
			t.Fatalf("call: %v", res.err)
		}
		res.r.t = t
		return res.r
	case <-time.After(20 * time.Second):
		t.Fatal("call never answered")
	}
	return response{}
}

func TestSyncWebhookAnswersWithTheJobsOutput(t *testing.T) {
	f := newHookFixture(t)
	w := f.register("w1")
	call := f.goHook("POST", "/hooks/sync")
	claim := f.claim(w, "10")
	if claim == nil || claim["step_name"] != "run" {
		t.Fatalf("claim = %v, want the webhook job's step", claim)
	}
	id := claim["job_id"].(string)
	f.worker("POST", "/worker/jobs/"+id+"/steps/run/start", map[string]any{"worker_id": w}).expect(200)
	f.worker("POST", "/worker/jobs/"+id+"/steps/run/complete", map[string]any{
		"worker_id": w, "output": map[string]any{"greeting": "hi"}, "exit_code": 0, "error": nil,
	}).expect(200)

	m := await(t, call).expect(200).object()
	assertKeys(t, "sync answer", m, "job_id", "trigger", "task", "status", "output")
	want := map[string]any{"job_id": id, "trigger": "sync", "task": "echo", "status": "completed",
		"output": map[string]any{"run": map[string]any{"greeting": "hi"}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("sync answer = %v, want %v", m, want)
	}
}

func TestSyncWebhookFailedJobHasNoOutput(t *testing.T) {
	f := newHookFixture(t)
	w := f.register("w1")
	call := f.goHook("POST", "/hooks/sync")
	claim := f.claim(w, "10")
	if claim == nil {
		t.Fatal("no step to claim")
	}
	id := claim["job_id"].(string)
	f.worker("POST", "/worker/jobs/"+id+"/steps/run/start", map[string]any{"worker_id": w}).expect(200)
	f.worker("POST", "/worker/jobs/"+id+"/steps/run/complete", map[string]any{
		"worker_id": w, "output": map[string]any{"partial": true}, "exit_code": 1, "error": "boom",
	}).expect(200)
	m := await(t, call).expect(200).object()
	if m["status"] != "failed" || m["output"] != nil {
		t.Errorf("sync answer = %v, want failed with null output", m)
	}
}

func TestSyncWebhookTimeoutAnswers202WithTheStatus(t *testing.T) {
	f := newHookFixture(t)
	began := time.Now()
	m := f.mustHook("POST", "/hooks/quick", "", "", nil).expect(202).object()
	if waited := time.Since(began); waited < time.Second {
		t.Errorf("answered after %s, before the trigger's 1 s timeout", waited)
	}
	assertKeys(t, "timeout answer", m, "job_id", "trigger", "task", "status")
	if m["status"] != "pending" || m["trigger"] != "quick" || m["task"] != "echo" {
		t.Errorf("timeout answer = %v, want the pending job", m)
	}
}

var hookJobKeys = []string{"job_id", "trigger", "task", "status", "output", "created_at", "completed_at"}

func TestWebhookJobStatusEndpoint(t *testing.T) {
	f := newHookFixture(t)
	id := f.mustHook("POST", "/hooks/open", "", "", nil).expect(200).object()["job_id"].(string)
	locked := f.mustHook("POST", "/hooks/locked?secret=s3cret", "", "", nil).expect(200).object()["job_id"].(string)
	apiJob := f.api("POST", "/api/workspaces/beta/tasks/echo/execute", map[string]any{"input": map[string]any{}}).expect(200).object()["job_id"].(string)

	m := f.api("GET", "/hooks/open/jobs/"+id, nil).expect(200).object()
	assertKeys(t, "status answer", m, hookJobKeys...)
	if m["job_id"] != id || m["trigger"] != "open" || m["task"] != "echo" || m["status"] != "pending" ||
		m["output"] != nil || m["completed_at"] != nil || !strings.HasSuffix(m["created_at"].(string), "Z") {
		t.Errorf("status answer = %v", m)
	}

	tests := []struct {
		name   string
		path   string
		status int
		want   string
	}{
		{"wait times out", "/hooks/open/jobs/" + id + "?wait=true&timeout=0", 202, ""},
		{"no wait answers at once", "/hooks/open/jobs/" + id + "?wait=false&timeout=300", 200, ""},
		{"invalid job id", "/hooks/open/jobs/not-a-uuid", 400, "invalid job id"},
		{"invalid wait", "/hooks/open/jobs/" + id + "?wait=maybe", 400, "wait"},
		{"invalid timeout", "/hooks/open/jobs/" + id + "?wait=true&timeout=soon", 400, "timeout"},
		{"timeout over the maximum", "/hooks/open/jobs/" + id + "?wait=true&timeout=301", 400, "timeout"},
		{"negative timeout", "/hooks/open/jobs/" + id + "?timeout=-1", 400, "timeout"},
		{"missing secret", "/hooks/locked/jobs/" + locked, 401, "webhook secret"},
		{"wrong secret", "/hooks/locked/jobs/" + locked + "?secret=x", 401, "webhook secret"},
		{"right secret", "/hooks/locked/jobs/" + locked + "?secret=s3cret", 200, ""},
		{"unknown webhook", "/hooks/nope/jobs/" + id, 404, `webhook "nope"`},
		{"disabled webhook", "/hooks/off/jobs/" + id, 404, `webhook "off"`},
		{"job of another webhook", "/hooks/other/jobs/" + id, 404, "job " + id},
		{"job not made by a webhook", "/hooks/open/jobs/" + apiJob, 404, "job " + apiJob},
		{"unknown job", "/hooks/open/jobs/01890000-0000-7000-8000-000000000000", 404, "job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.in(t).api("GET", tt.path, nil)
			if tt.want != "" {
				r.expectError(tt.status, tt.want)
				return
			}
			m := r.expect(tt.status).object()
			assertKeys(t, "status answer", m, hookJobKeys...)
		})
	}
}

func TestWebhookJobStatusWaitsForTheEnd(t *testing.T) {
	f := newHookFixture(t)
	w := f.register("w1")
	id := f.mustHook("POST", "/hooks/open", "", "", nil).expect(200).object()["job_id"].(string)
	waiting := f.goHook("GET", "/hooks/open/jobs/"+id+"?wait=true&timeout=30")
	f.runStep(w, id, "run", map[string]any{"done": true})

	m := await(t, waiting).expect(200).object()
	if m["status"] != "completed" || m["completed_at"] == nil ||
		!reflect.DeepEqual(m["output"], map[string]any{"run": map[string]any{"done": true}}) {
		t.Errorf("status after waiting = %v", m)
	}
	// Terminal already: wait answers at once with 200.
	f.api("GET", "/hooks/open/jobs/"+id+"?wait=true", nil).expect(200)
}
