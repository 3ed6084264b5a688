package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/appliance-sh/appliance/audit"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/openapitest"
	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/store"
)

// workerToken is the shared token of every fixture's worker endpoints.
const workerToken = "test-worker-token"

// fixedNow is the fixture's clock for trigger next_runs: noon UTC the day
// before Berlin springs forward.
var fixedNow = time.Date(2025, 3, 29, 12, 0, 0, 0, time.UTC)

// mainWorkflow is the workspace every test runs against.
const mainWorkflow = `
actions:
  greet:
    type: script
    input:
      name:
        type: string
        required: true
    script: echo "hello {{ input.name }}"
tasks:
  hello:
    description: Say hello
    folder: demo/greetings
    input:
      name:
        type: string
        required: true
      times:
        type: integer
        default: 1
    flow:
      say:
        action: greet
        input:
          name: "{{ input.name }}"
      after:
        depends_on: [say]
        type: script
        script: echo done
  other:
    flow:
      only:
        type: script
        script: echo other
triggers:
  nightly:
    type: scheduler
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    task: hello
    input:
      name: night
  paused:
    type: scheduler
    cron: "0 * * * *"
    task: other
    enabled: false
  incoming:
    type: webhook
    name: incoming-hook
    task: hello
    secret: s3cret
`

// fixture is a real server: engine over a bbolt file, JSONL logs and a
// workspace registry, all in a temp dir, behind a real HTTP listener.
type fixture struct {
	t      testing.TB
	url    string
	eng    *engine.Engine
	logs   *store.Logs
	wsDir  string
	client *http.Client
	// secrets are the secrets of the workers registered, by id (shared by
	// the fixture's copies).
	secrets *sync.Map
}

// fixtureConfig is what options may change: the API's config and the engine's.
type fixtureConfig struct {
	api.Config
	engine engine.Config
	// wrapLogs, if set, stands between the API and the log store.
	wrapLogs func(api.LogStore) api.LogStore
}

type fixtureOption func(*fixtureConfig)

func withoutWorkerToken() fixtureOption { return func(c *fixtureConfig) { c.WorkerToken = "" } }

// withHeartbeatTimeout lets remote workers go quiet for only d before their
// steps are recovered (the default is an hour).
func withHeartbeatTimeout(d time.Duration) fixtureOption {
	return func(c *fixtureConfig) { c.engine.HeartbeatTimeout = d }
}

func newFixture(t *testing.T, opts ...fixtureOption) *fixture {
	t.Helper()
	tmp := t.TempDir()
	wsDir := filepath.Join(tmp, "main")
	writeFile(t, filepath.Join(wsDir, ".workflows", "main.yaml"), mainWorkflow, 0o644)
	writeFile(t, filepath.Join(wsDir, "scripts", "run.sh"), "#!/bin/sh\necho run\n", 0o755)
	writeFile(t, filepath.Join(wsDir, "README.md"), "the main workspace\n", 0o644)
	writeFile(t, filepath.Join(wsDir, ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	brokenDir := filepath.Join(tmp, "broken")
	writeFile(t, filepath.Join(brokenDir, ".workflows", "main.yaml"), "tasks:\n  bad:\n    flow:\n      s:\n        action: missing\n", 0o644)
	f := startAPI(t, tmp, map[string]string{"main": wsDir, "broken": brokenDir}, opts...)
	f.wsDir = wsDir
	return f
}

// startAPI serves the workspaces (name -> dir) through a real engine on a
// bbolt file under tmp, real log files and a real HTTP server on 127.0.0.1.
func startAPI(t testing.TB, tmp string, dirs map[string]string, opts ...fixtureOption) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg, err := workspace.NewRegistry(dirs, map[string]string{}, log)
	if err != nil {
		t.Fatalf("registry: %v", err)
	}
	db, err := store.Open(filepath.Join(tmp, "data", "appliance.db"))
	if err != nil {
		t.Fatalf("store: %v", err)
	}
	logs, err := store.OpenLogs(filepath.Join(tmp, "logs"))
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	// The audit trail, as the server wires it: denied requests wait in
	// the queue for the engine's next commit.
	db.SetAuditKey(testAuditKey)
	queue := audit.NewQueue(0)
	fc := fixtureConfig{
		engine: engine.Config{Store: db, Workspaces: reg, Logs: logs, Logger: log, HeartbeatTimeout: time.Hour, Audit: queue},
		Config: api.Config{
			Audit: db, AuditQueue: queue,
			WorkerToken: workerToken, Version: "1.2.3-test", Logger: log, ClaimWaitMax: 5 * time.Second,
			Now: func() time.Time { return fixedNow },
			// The slow-viewer test stalls a viewer for as long as its pushes
			// take, which is seconds under the race detector.
			StreamWriteTimeout: time.Minute,
		},
	}
	for _, o := range opts {
		o(&fc)
	}
	eng, err := engine.New(fc.engine)
	if err != nil {
		t.Fatalf("engine: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- eng.Run(ctx) }()
	watchDone := make(chan error, 1)
	go func() { watchDone <- reg.Watch(ctx) }()

	cfg := fc.Config
	cfg.Engine, cfg.Workspaces, cfg.Logs = eng, reg, logs
	if fc.wrapLogs != nil {
		cfg.Logs = fc.wrapLogs(logs)
	}
	srv := httptest.NewServer(api.New(cfg))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		if err := <-runDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("engine run: %v", err)
		}
		if err := <-watchDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("workspace watch: %v", err)
		}
		logs.Close()
		db.Close()
	})
	// Every answer a test receives is checked against the OpenAPI document:
	// one it does not describe fails the request.
	client := &http.Client{Timeout: 30 * time.Second, Transport: openapitest.Transport(nil)}
	return &fixture{t: t, url: srv.URL, eng: eng, logs: logs, client: client, secrets: &sync.Map{}}
}

// dialOptions are the options of every WebSocket a test opens: the
// handshake's answer is checked against the OpenAPI document like any
// other (a client Timeout would cut the stream, so none is set).
func dialOptions(header http.Header) *websocket.DialOptions {
	return &websocket.DialOptions{HTTPClient: &http.Client{Transport: openapitest.Transport(nil)}, HTTPHeader: header}
}

// in returns the fixture reporting to another test, for subtests.
func (f *fixture) in(t *testing.T) *fixture {
	c := *f
	c.t = t
	return &c
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// response is a finished HTTP exchange.
type response struct {
	t      testing.TB
	status int
	header http.Header
	body   []byte
}

// do sends a request; body is JSON-encoded unless it is a string or []byte,
// which are sent raw. A JSON body gets Content-Type: application/json
// unless header names one; header may set Host.
func (f *fixture) do(method, path string, body any, header map[string]string) response {
	f.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
		if k == "Host" {
			req.Host = v // the client sends req.Host, not the header
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{t: f.t, status: resp.StatusCode, header: resp.Header, body: data}
}

// api calls a public endpoint.
func (f *fixture) api(method, path string, body any) response {
	f.t.Helper()
	return f.do(method, path, body, nil)
}

// worker calls a worker endpoint with the shared token and, as
// appliance's worker does, the secret of the worker its body names, if
// one registered here.
func (f *fixture) worker(method, path string, body any) response {
	f.t.Helper()
	header := map[string]string{"Authorization": "Bearer " + workerToken}
	var named struct {
		WorkerID string `json:"worker_id"`
	}
	switch b := body.(type) {
	case map[string]any:
		named.WorkerID, _ = b["worker_id"].(string)
	case []byte: // a fuzzed body, if it parses
		_ = json.Unmarshal(b, &named)
	}
	if secret, ok := f.secrets.Load(named.WorkerID); ok {
		header[workerproto.SecretHeader] = secret.(string)
	}
	return f.do(method, path, body, header)
}

// expect fails the test unless the status is want, showing the body.
func (r response) expect(want int) response {
	r.t.Helper()
	if r.status != want {
		r.t.Fatalf("status %d, want %d; body: %s", r.status, want, r.body)
	}
	return r
}

func (r response) object() map[string]any {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		r.t.Fatalf("body is not a JSON object: %v: %s", err, r.body)
	}
	return m
}

func (r response) array() []map[string]any {
	r.t.Helper()
	var a []map[string]any
	if err := json.Unmarshal(r.body, &a); err != nil {
		r.t.Fatalf("body is not a JSON array of objects: %v: %s", err, r.body)
	}
	return a
}

// errorMessage checks the body is exactly {"error": "..."} and returns it.
func (r response) errorMessage() string {
	r.t.Helper()
	m := r.object()
	msg, ok := m["error"].(string)
	if !ok || len(m) != 1 || msg == "" {
		r.t.Fatalf("want an error body {\"error\": ...}, got %s", r.body)
	}
	return msg
}

// expectError checks status and that the error message mentions want.
func (r response) expectError(status int, want string) {
	r.t.Helper()
	r.expect(status)
	if msg := r.errorMessage(); !strings.Contains(msg, want) {
		r.t.Fatalf("error %q does not mention %q", msg, want)
	}
}

// assertKeys fails unless obj has exactly the keys.
func assertKeys(t *testing.T, what string, obj map[string]any, keys ...string) {
	t.Helper()
	got := make([]string, 0, len(obj))
	for k := range obj {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(keys)
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("%s has keys %v, want %v", what, got, keys)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// execute starts the hello task and returns the job id.
func (f *fixture) execute(name string) string {
	f.t.Helper()
	m := f.api("POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": name}}).expect(200).object()
	id, _ := m["job_id"].(string)
	if id == "" {
		f.t.Fatalf("execute returned no job_id: %v", m)
	}
	return id
}

// register joins a remote worker and returns its id.
func (f *fixture) register(name string, tags ...string) string {
	f.t.Helper()
	if tags == nil {
		tags = []string{}
	}
	m := f.worker("POST", "/worker/register", map[string]any{"name": name, "tags": tags, "want_secret": true}).expect(200).object()
	id, _ := m["worker_id"].(string)
	secret, _ := m["worker_secret"].(string)
	if id == "" || secret == "" {
		f.t.Fatalf("register returned no worker_id or worker_secret: %v", m)
	}
	f.secrets.Store(id, secret)
	return id
}

// secret is the secret of a worker registered here.
func (f *fixture) secret(workerID string) string {
	f.t.Helper()
	secret, ok := f.secrets.Load(workerID)
	if !ok {
		f.t.Fatalf("worker %s did not register here", workerID)
	}
	return secret.(string)
}

// claim long-polls once for a step; nil when there is no work.
func (f *fixture) claim(workerID string, wait string) map[string]any {
	f.t.Helper()
	m := f.worker("POST", "/worker/jobs/claim?wait="+wait, map[string]any{"worker_id": workerID, "tags": []string{}}).expect(200).object()
	if m["job_id"] == nil {
		return nil
	}
	return m
}

// claimStep claims until it gets the step of the job (a step becomes
// ready only once its dependencies are committed).
func (f *fixture) claimStep(workerID, jobID, step string) map[string]any {
	f.t.Helper()
	m := f.claim(workerID, "5")
	if m == nil || m["job_id"] != jobID || m["step_name"] != step {
		f.t.Fatalf("claim got %v, want step %s of job %s", m, step, jobID)
	}
	return m
}

// runStep claims, starts and completes a step with the given output.
func (f *fixture) runStep(workerID, jobID, step string, output map[string]any) {
	f.t.Helper()
	f.endStep(workerID, jobID, step, output, 0, nil)
}

// endStep claims and starts a step, then reports it complete with an
// output, an exit code and an error (nil for none).
func (f *fixture) endStep(workerID, jobID, step string, output map[string]any, exitCode int, errMsg any) {
	f.t.Helper()
	f.claimStep(workerID, jobID, step)
	f.worker("POST", "/worker/jobs/"+jobID+"/steps/"+step+"/start", map[string]any{"worker_id": workerID}).expect(200)
	f.worker("POST", "/worker/jobs/"+jobID+"/steps/"+step+"/complete", map[string]any{
		"worker_id": workerID, "output": output, "exit_code": exitCode, "error": errMsg,
	}).expect(200)
}

// jobStatus reads a job's status through the API.
func (f *fixture) jobStatus(jobID string) string {
	f.t.Helper()
	s, _ := f.api("GET", "/api/jobs/"+jobID, nil).expect(200).object()["status"].(string)
	return s
}

// pushLogs sends lines of one step through the worker endpoint, as the
// worker holding it.
func (f *fixture) pushLogs(workerID, jobID, step string, lines ...string) map[string]any {
	f.t.Helper()
	return f.worker("POST", "/worker/jobs/"+jobID+"/logs", logPush(workerID, step, lines...)).expect(200).object()
}

// logPush is a log push body.
func logPush(workerID, step string, lines ...string) map[string]any {
	ls := make([]map[string]any, len(lines))
	for i, l := range lines {
		ls[i] = map[string]any{"ts": fixedNow.Format(time.RFC3339Nano), "stream": "stdout", "line": l}
	}
	return map[string]any{"worker_id": workerID, "step_name": step, "lines": ls}
}
