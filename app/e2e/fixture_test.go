package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/openapitest"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/app/config"
)

// testClient keeps connections alive for many concurrent requests, as a
// real API client would (the default client keeps only two per host, so
// parallel tests and benchmarks would open a connection per request).
var testClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

// serverFixture is a real server on 127.0.0.1 with its data in a temp dir.
type serverFixture struct {
	t   testing.TB
	srv *testServer
	url string
	// workerCPU, when set, is the CPU time a remote worker process used
	// so far (benchmarks report it beside the server's).
	workerCPU func() time.Duration
}

// startFixture starts a server on a random loopback port serving the given
// workspaces (name -> dir), with in-process workers unless workers is 0.
func startFixture(t testing.TB, workspaces map[string]string, workers int, tweak ...func(*config.Server)) *serverFixture {
	t.Helper()
	cfg := testServerConfig(t, workspaces, workers, tweak...)
	srv, err := startServer(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	if workers > 0 {
		// Tests start once the in-process pool has registered, as a user
		// would find the server a moment after start-up: a job created
		// earlier waits for it with a "no worker is active" _server line.
		waitUntil(t, "the in-process workers to register", func() bool {
			var list struct {
				Total int `json:"total"`
			}
			do(t, "GET", f.url+"/api/workers", nil, &list)
			return list.Total > 0
		})
	}
	return f
}

// testServerConfig is a server config for a test: a random loopback port,
// data and logs in a temp dir, the given workspaces and worker slots.
func testServerConfig(t testing.TB, workspaces map[string]string, workers int, tweak ...func(*config.Server)) *config.Server {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LogStorage.LocalDir = filepath.Join(dir, "logs")
	cfg.Workers = &workers
	// A test that fails mid-step must not wait minutes for the step, nor
	// leave its process behind.
	cfg.Effective.DrainTimeout = 2 * time.Second
	cfg.Workspaces = map[string]config.Workspace{}
	for name, path := range workspaces {
		cfg.Workspaces[name] = config.Workspace{Type: "folder", Path: path}
		// The examples' event source would hold a worker slot and add a
		// job to every test of something else; a test of it turns it on.
		if filepath.Clean(path) == filepath.Join("..", "..", "examples") {
			cfg.Test.NoEventSources = true
		}
	}
	for _, f := range tweak {
		f(cfg)
	}
	return cfg
}

// testLogger discards the server's log, or shows it with -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// do sends a JSON request and decodes the JSON answer into out (if not nil),
// returning the status code.
func do(t testing.TB, method, url string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkAnswer(t, req, resp, raw); err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: status %d, body %q: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode
}

// checkAnswer validates an answer against the OpenAPI document, as the api
// tests do. Benchmarks skip it: they measure the server, not the check.
func checkAnswer(t testing.TB, req *http.Request, resp *http.Response, body []byte) error {
	if _, bench := t.(*testing.B); bench {
		return nil
	}
	doc, err := openapitest.Load()
	if err != nil {
		return err
	}
	return doc.CheckResponse(req, resp, body)
}

// jobView is the job detail as the API returns it.
type jobView struct{ wire.JobDetail }

type stepView = wire.Step

func (j jobView) step(name string) stepView {
	for _, s := range j.Steps {
		if s.StepName == name {
			return s
		}
	}
	return stepView{}
}

// execute runs a task and returns the job id, failing the test on a non-200.
func (f *serverFixture) execute(ws, task string, input map[string]any) string {
	f.t.Helper()
	var out struct {
		JobID string `json:"job_id"`
		Error string `json:"error"`
	}
	if code := do(f.t, "POST", f.url+"/api/workspaces/"+ws+"/tasks/"+task+"/execute", map[string]any{"input": input}, &out); code != 200 {
		f.t.Fatalf("execute %s/%s: %d %s", ws, task, code, out.Error)
	}
	return out.JobID
}

func (f *serverFixture) job(id string) jobView {
	f.t.Helper()
	var j jobView
	if code := do(f.t, "GET", f.url+"/api/jobs/"+id, nil, &j); code != 200 {
		f.t.Fatalf("get job %s: %d", id, code)
	}
	return j
}

// waitJob polls the job until cond holds, failing after a deadline.
func (f *serverFixture) waitJob(id string, what string, cond func(jobView) bool) jobView {
	f.t.Helper()
	return waitFor(f.t, "job "+id+": "+what, func() jobView { return f.job(id) }, cond)
}

// waitFor polls get until cond holds for its value, failing the test after
// a deadline with the last value seen.
func waitFor[T any](t testing.TB, what string, get func() T, cond func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := get()
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last %+v", what, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitUntil polls cond until it holds, failing the test after a deadline.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitFor(t, what, cond, func(ok bool) bool { return ok })
}

func (f *serverFixture) waitTerminal(id string) jobView {
	return f.waitJob(id, "a terminal status", func(j jobView) bool {
		switch j.Status {
		case "completed", "failed", "cancelled":
			return true
		}
		return false
	})
}

func (f *serverFixture) logs(id, step string) string {
	f.t.Helper()
	var out struct {
		Logs string `json:"logs"`
	}
	path := "/api/jobs/" + id + "/logs"
	if step != "" {
		path = "/api/jobs/" + id + "/steps/" + step + "/logs"
	}
	if code := do(f.t, "GET", f.url+path, nil, &out); code != 200 {
		f.t.Fatalf("GET %s: %d", path, code)
	}
	return out.Logs
}

// tryDo is do without failing the test: network errors are returned.
func tryDo(method, url, body string, out any) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if err := checkAnswer(nil, req, resp, raw); err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}
