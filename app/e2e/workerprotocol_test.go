package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// interfaceWorker is a worker of another make, driven by raw HTTP: it
// sends the interface's bodies to the letter and nothing of ours (no
// secret, no worker_id on log pushes and results).
type interfaceWorker struct {
	t   *testing.T
	url string
	// secret, if set, is sent as appliance's worker does (ours).
	secret string
}

// post sends body to path with the worker token and decodes the answer
// into out (if not nil), returning the status.
func (w interfaceWorker) post(path string, body any, out any) int {
	w.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, w.url+path, bytes.NewReader(raw))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+workerToken)
	req.Header.Set("Content-Type", "application/json")
	if w.secret != "" {
		req.Header.Set("X-Worker-Secret", w.secret)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := checkAnswer(w.t, req, resp, answer); err != nil {
		w.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			w.t.Fatalf("POST %s: status %d, body %q: %v", path, resp.StatusCode, answer, err)
		}
	}
	return resp.StatusCode
}

// claim claims until it gets a step, and returns its job and name.
func (w interfaceWorker) claim(workerID string) (job, step string) {
	w.t.Helper()
	var claim struct {
		JobID    *string `json:"job_id"`
		StepName *string `json:"step_name"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for claim.JobID == nil {
		if time.Now().After(deadline) {
			w.t.Fatal("no step claimed in 10s")
		}
		if code := w.post("/worker/jobs/claim?wait=2", map[string]any{"worker_id": workerID, "tags": []string{}}, &claim); code != 200 {
			w.t.Fatalf("claim: %d", code)
		}
	}
	return *claim.JobID, *claim.StepName
}

const interfaceWorkspace = `
tasks:
  greet:
    flow:
      hello:
        type: script
        script: echo hello
`

// TestInterfaceWorkerRunsAJobUnderWorkerProtocolInterface: with
// worker_protocol: interface, a worker that sends the interface's bodies
// only (register, claim, start, log push with step_name and lines,
// complete with output, exit_code and error) runs a job end to end (and
// the server warned at start-up that this is weaker). Its
// reports without worker_id are taken only while the step runs, and they
// cannot stand in for a worker that registered with a secret.
func TestInterfaceWorkerRunsAJobUnderWorkerProtocolInterface(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, interfaceWorkspace)
	cfg := testServerConfig(t, map[string]string{"main": ws}, 0, func(c *config.Server) {
		c.WorkerToken, c.WorkerProtocol = workerToken, config.WorkerProtocolInterface
	})
	serverLog := &syncBuffer{}
	srv, err := startServer(context.Background(), cfg, slog.New(slog.NewTextHandler(serverLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if l := serverLog.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "worker_protocol: interface") {
		t.Fatalf("the server did not warn that worker_protocol: interface is weaker:\n%s", l)
	}
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	w := interfaceWorker{t: t, url: f.url}
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	if code := w.post("/worker/register", map[string]any{"name": "foreign", "tags": []string{}}, &reg); code != 200 || reg.WorkerID == "" {
		t.Fatalf("register: %d %+v", code, reg)
	}
	id := f.execute("main", "greet", nil)
	if job, name := w.claim(reg.WorkerID); job != id || name != "hello" {
		t.Fatalf("claimed %s/%s, want %s/hello", job, name, id)
	}
	step := "/worker/jobs/" + id + "/steps/hello/"
	lines := map[string]any{"step_name": "hello", "lines": []map[string]any{
		{"ts": time.Now().UTC().Format(time.RFC3339Nano), "stream": "stdout", "line": "hello from afar"}}}
	if code := w.post(step+"start", map[string]any{"worker_id": reg.WorkerID}, nil); code != 200 {
		t.Fatalf("start: %d", code)
	}
	if code := w.post("/worker/jobs/"+id+"/logs", lines, nil); code != 200 {
		t.Fatalf("log push: %d", code)
	}
	result := map[string]any{"output": map[string]any{"greeting": "hello"}, "exit_code": 0, "error": nil}
	if code := w.post(step+"complete", result, nil); code != 200 {
		t.Fatalf("complete: %d", code)
	}
	j := f.waitTerminal(id)
	if s := j.step("hello"); j.Status != "completed" || s.WorkerID == nil || *s.WorkerID != reg.WorkerID ||
		s.Output.(map[string]any)["greeting"] != "hello" {
		t.Fatalf("job %s, step %+v; want completed by %s with its output", j.Status, s, reg.WorkerID)
	}
	if logs := f.logs(id, "hello"); !strings.Contains(logs, "hello from afar") {
		t.Fatalf("step log %q lacks the pushed line", logs)
	}
	// Once the step has ended, a report naming nobody has nobody to stand for.
	if code := w.post(step+"complete", result, nil); code != 409 {
		t.Fatalf("second complete: %d, want 409", code)
	}
	if code := w.post("/worker/jobs/"+id+"/logs", lines, nil); code != 409 {
		t.Fatalf("late log push: %d, want 409", code)
	}

	// A worker that registered with a secret keeps needing it: a report
	// naming nobody, for its step, is refused without the secret.
	var strict struct {
		WorkerID string `json:"worker_id"`
		Secret   string `json:"worker_secret"`
	}
	if code := w.post("/worker/register", map[string]any{"name": "strict", "tags": []string{}, "want_secret": true}, &strict); code != 200 || strict.Secret == "" {
		t.Fatalf("register with a secret: %d %+v", code, strict)
	}
	id = f.execute("main", "greet", nil)
	if job, _ := (interfaceWorker{t: t, url: f.url, secret: strict.Secret}).claim(strict.WorkerID); job != id {
		t.Fatalf("the strict worker claimed a step of %s, want %s", job, id)
	}
	step = "/worker/jobs/" + id + "/steps/hello/"
	if code := w.post("/worker/jobs/"+id+"/logs", lines, nil); code != 403 {
		t.Fatalf("log push for the strict worker's step without its secret: %d, want 403", code)
	}
	if code := w.post(step+"complete", result, nil); code != 403 {
		t.Fatalf("complete of the strict worker's step without its secret: %d, want 403", code)
	}
	if s := f.job(id).step("hello"); s.Output != nil || s.Status == "completed" {
		t.Fatalf("the strict worker's step was changed by a report without its secret: %+v", s)
	}
}

// TestInterfaceWorkerIsRefusedByDefault: without worker_protocol:
// interface, the interface's bodies alone are refused with 400: the
// registration (no secret asked for), and a log push and a result naming
// no worker.
func TestInterfaceWorkerIsRefusedByDefault(t *testing.T) {
	f, _ := remoteFixture(t, interfaceWorkspace)
	w := interfaceWorker{t: t, url: f.url}
	var refusal struct {
		Error string `json:"error"`
	}
	if code := w.post("/worker/register", map[string]any{"name": "foreign", "tags": []string{}}, &refusal); code != 400 ||
		!strings.Contains(refusal.Error, "worker_protocol: interface") {
		t.Fatalf("register: %d %q, want 400 naming worker_protocol: interface", code, refusal.Error)
	}
	id := f.execute("main", "greet", nil)
	step := "/worker/jobs/" + id + "/steps/hello/"
	lines := map[string]any{"step_name": "hello", "lines": []map[string]any{{"stream": "stdout", "line": "x"}}}
	if code := w.post("/worker/jobs/"+id+"/logs", lines, &refusal); code != 400 || !strings.Contains(refusal.Error, "worker_id") {
		t.Fatalf("log push: %d %q, want 400 asking for worker_id", code, refusal.Error)
	}
	if code := w.post(step+"complete", map[string]any{"output": nil, "exit_code": 0, "error": nil}, &refusal); code != 400 ||
		!strings.Contains(refusal.Error, "worker_id") {
		t.Fatalf("complete: %d %q, want 400 asking for worker_id", code, refusal.Error)
	}
}
