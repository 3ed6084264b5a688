package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/app/config"
)

// These tests prove remote workers end to end: a real server on 127.0.0.1
// and real `appliance worker` processes built from this module.

const workerToken = "remote-secret"

// remoteFixture is a server without in-process workers that accepts
// workerToken, serving the workspace "main".
func remoteFixture(t *testing.T, yaml string, tweak ...func(*config.Server)) (*serverFixture, string) {
	t.Helper()
	ws := t.TempDir()
	writeWorkspace(t, ws, yaml)
	tweak = append([]func(*config.Server){func(c *config.Server) { c.WorkerToken = workerToken }}, tweak...)
	return startFixture(t, map[string]string{"main": ws}, 0, tweak...), ws
}

func TestTaggedStepWaitsForAWorkerWithItsTags(t *testing.T) {
	f, _ := remoteFixture(t, `
actions:
  train:
    type: script
    tags: [gpu]
    script: echo training on gpu
tasks:
  route:
    flow:
      on-gpu:
        action: train
      plain-1:
        type: script
        script: echo plain 1
      plain-2:
        depends_on: [plain-1]
        type: script
        script: echo plain 2
      plain-3:
        depends_on: [plain-2]
        type: script
        script: echo plain 3
`)
	startWorkerProcess(t, f.url, workerToken, "cpu-1", "")
	cpu := f.worker("cpu-1")

	id := f.execute("main", "route", nil)
	// Three claim cycles of the untagged worker go by while the gpu step waits.
	j := f.waitJob(id, "the untagged chain to finish", func(j jobView) bool { return j.step("plain-3").Status == "completed" })
	for _, name := range []string{"plain-1", "plain-2", "plain-3"} {
		if s := j.step(name); s.WorkerID == nil || *s.WorkerID != cpu.ID {
			t.Fatalf("%s ran on %v, want the untagged worker %s", name, s.WorkerID, cpu.ID)
		}
	}
	if g := j.step("on-gpu"); g.Status != "ready" || g.WorkerID != nil {
		t.Fatalf("gpu step with only an untagged worker: status %s, worker %v; want ready and unclaimed", g.Status, g.WorkerID)
	}
	want := `step "on-gpu" needs worker tags [gpu]; no active worker has them`
	if logs := f.logs(id, "_server"); !hasLine(t, logs, "_server", "stderr", want) {
		t.Fatalf("_server log lacks %q:\n%s", want, logs)
	}

	startWorkerProcess(t, f.url, workerToken, "gpu-1", "tags: [gpu]\n")
	gpu := f.worker("gpu-1")
	j = f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	if g := j.step("on-gpu"); g.WorkerID == nil || *g.WorkerID != gpu.ID {
		t.Fatalf("gpu step ran on %v, want the gpu worker %s", g.WorkerID, gpu.ID)
	}
	if logs := f.logs(id, "on-gpu"); !strings.Contains(logs, `"line":"training on gpu"`) {
		t.Fatalf("gpu step log: %q", logs)
	}
	var detail workerDetailView
	do(t, "GET", f.url+"/api/workers/"+cpu.ID, nil, &detail)
	for _, s := range detail.Steps.Items {
		if s.StepName == "on-gpu" {
			t.Fatalf("the untagged worker's records include the gpu step: %+v", s)
		}
	}
}

func TestRemoteStepReadsAFileShippedWithTheWorkspace(t *testing.T) {
	f, ws := remoteFixture(t, `
tasks:
  read:
    flow:
      show:
        type: script
        script: cat data/message.txt
`)
	// The job runs on the revision it is created on: wait for the one
	// with the file.
	before := f.currentRevision()
	writeFile(t, filepath.Join(ws, "data", "message.txt"), "shipped with the workspace\n")
	waitFor(t, "the workspace with the file to load", f.currentRevision, func(r string) bool { return r != before })
	startWorkerProcess(t, f.url, workerToken, "remote-1", "")
	w := f.worker("remote-1")

	id := f.execute("main", "read", nil)
	j := f.waitTerminal(id)
	if s := j.step("show"); j.Status != "completed" || s.WorkerID == nil || *s.WorkerID != w.ID {
		t.Fatalf("job %s, step %+v; want completed on %s", j.Status, s, w.ID)
	}
	if logs := f.logs(id, "show"); !strings.Contains(logs, `"line":"shipped with the workspace"`) {
		t.Fatalf("step log lacks the file's content: %q", logs)
	}
}

// tarballCounter is a reverse proxy between a worker and the server that
// counts the answers to workspace downloads by status.
type tarballCounter struct {
	mu       sync.Mutex
	statuses map[int]int
}

func (c *tarballCounter) count(status int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statuses[status]
}

// workerProxy is a reverse proxy to the server at target (parsed in u),
// for a test to put between the server and a worker.
func workerProxy(t *testing.T, target string) (proxy *httputil.ReverseProxy, u *url.URL) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy = httputil.NewSingleHostReverseProxy(u)
	// Workers hang up on their long-polls when they stop; that is no news.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	return proxy, u
}

// serveProxy serves h on a loopback address until the test ends and
// returns its URL.
func serveProxy(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func startTarballCounter(t *testing.T, target string) (*tarballCounter, string) {
	c := &tarballCounter{statuses: map[int]int{}}
	proxy, _ := workerProxy(t, target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if strings.HasPrefix(resp.Request.URL.Path, "/worker/workspace/") {
			c.mu.Lock()
			c.statuses[resp.StatusCode]++
			c.mu.Unlock()
		}
		return nil
	}
	return c, serveProxy(t, proxy)
}

func TestSecondClaimOfARevisionDoesNotDownloadItAgain(t *testing.T) {
	f, ws := remoteFixture(t, `
tasks:
  twice:
    flow:
      first:
        type: script
        script: cat data/message.txt
      second:
        depends_on: [first]
        type: script
        script: cat data/message.txt
`)
	before := f.currentRevision()
	writeFile(t, filepath.Join(ws, "data", "message.txt"), "cached\n")
	waitFor(t, "the workspace with the file to load", f.currentRevision, func(r string) bool { return r != before })
	counter, proxyURL := startTarballCounter(t, f.url)
	p := startWorkerProcess(t, proxyURL, workerToken, "remote-1", "")

	id := f.execute("main", "twice", nil)
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	if got, want := f.logs(id, ""), `"line":"cached"`; strings.Count(got, want) != 2 {
		t.Fatalf("both steps should print the file; log:\n%s", got)
	}
	if ok, notModified := counter.count(http.StatusOK), counter.count(http.StatusNotModified); ok != 1 || notModified != 0 {
		t.Fatalf("workspace downloads: %d answered 200 and %d answered 304; want one download, and the cached revision used without asking", ok, notModified)
	}
	entries, err := os.ReadDir(filepath.Join(p.cache, "main"))
	if err != nil {
		t.Fatal(err)
	}
	var revs []string
	for _, e := range entries {
		revs = append(revs, e.Name())
	}
	if len(revs) != 1 || revs[0] != j.Revision {
		t.Fatalf("worker cache holds %v; want just the job's revision %s", revs, j.Revision)
	}
}

func TestLogStreamShowsARemoteStepsLinesLiveAndClosesNormally(t *testing.T) {
	logStreamShowsARemoteStepsLinesLive(t)
}

func logStreamShowsARemoteStepsLinesLive(t *testing.T, storage ...func(*config.Server)) {
	f, _ := remoteFixture(t, `
tasks:
  ticks:
    flow:
      ticker:
        type: script
        script: |
          for i in 1 2 3 4 5 6 7 8; do echo "tick $i"; sleep 0.2; done
`, storage...)
	startWorkerProcess(t, f.url, workerToken, "remote-1", "")
	id := f.execute("main", "ticks", nil)
	f.waitJob(id, "the first tick to reach the log", func(jobView) bool { return strings.Contains(f.logs(id, "ticker"), "tick 1") })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.url, "http")+"/api/jobs/"+id+"/logs/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	var frames []string
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != websocket.StatusNormalClosure {
				t.Fatalf("stream ended with %v (close status %d), want a normal closure", err, code)
			}
			break
		}
		if typ != websocket.MessageText {
			t.Fatalf("frame of type %v, want text", typ)
		}
		frames = append(frames, string(data))
	}

	var ticks []string
	frameOf := map[string]int{}
	for i, fr := range frames {
		for _, l := range logLines(t, fr) {
			if l.Step == "ticker" {
				ticks = append(ticks, l.Line)
				frameOf[l.Line] = i
			}
		}
	}
	want := []string{"tick 1", "tick 2", "tick 3", "tick 4", "tick 5", "tick 6", "tick 7", "tick 8"}
	if strings.Join(ticks, ",") != strings.Join(want, ",") {
		t.Fatalf("streamed lines %q, want %q in order, once each", ticks, want)
	}
	if frameOf["tick 1"] != 0 {
		t.Fatalf("tick 1 was pushed before connecting, so it belongs in the backfill (frame 0), got frame %d", frameOf["tick 1"])
	}
	if frameOf["tick 8"] == 0 {
		t.Fatalf("every line came in the backfill; none live (%d frames)", len(frames))
	}
	if j := f.job(id); j.Status != "completed" {
		t.Fatalf("stream closed with the job %s", j.Status)
	}
	t.Logf("%d frames: backfill plus %d live chunks", len(frames), len(frames)-1)
}

func TestCancelKillsARemoteWorkersProcessWithinTwoSeconds(t *testing.T) {
	f, id, sleep, pgid := sleepOnRemoteWorker(t, "remote-1")
	if !groupRunning(t, pgid) {
		t.Fatalf("process group %d of %q is not running before the cancel", pgid, sleep)
	}

	began := time.Now()
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	for groupRunning(t, pgid) {
		if time.Since(began) > 2*time.Second {
			t.Fatalf("process group %d still alive %s after the cancel", pgid, time.Since(began))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("step process gone %s after the cancel call", time.Since(began).Round(time.Millisecond))
	j := f.waitTerminal(id)
	if j.Status != "cancelled" || j.step("wait").Status != "cancelled" {
		t.Fatalf("after cancel: job %s, step %s", j.Status, j.step("wait").Status)
	}
}

func TestKilledWorkerFailsItsStepAfterTheHeartbeatTimeout(t *testing.T) {
	sleep := uniqueSleep()
	f, _ := remoteFixture(t, `
tasks:
  lost:
    flow:
      long:
        type: script
        script: |
          echo started
          `+sleep+`
      after:
        depends_on: [long]
        type: script
        script: echo never
`, func(c *config.Server) { c.Effective.HeartbeatTimeout = 600 * time.Millisecond })
	p := startWorkerProcess(t, f.url, workerToken, "doomed", "")
	w := f.worker("doomed")
	id := f.execute("main", "lost", nil)
	waitSleepProcess(t, sleep)
	killAtCleanup(t, sleep)

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(10 * time.Second)
	j := f.waitTerminal(id)
	const msg = "Worker heartbeat timeout (worker doomed unresponsive)"
	if j.Status != "failed" {
		t.Fatalf("job %s, want failed: %+v", j.Status, j.Steps)
	}
	if s := j.step("long"); s.Status != "failed" || s.ErrorMessage == nil || *s.ErrorMessage != msg {
		t.Fatalf("lost step: %+v (error %v), want failed with %q", s, deref(s.ErrorMessage), msg)
	}
	if s := j.step("after"); s.Status != "skipped" {
		t.Fatalf("dependent of the lost step: %s, want skipped", s.Status)
	}
	if logs, want := f.logs(id, "_server"), `step "long" failed: `+msg; !hasLine(t, logs, "_server", "stderr", want) {
		t.Fatalf("_server log lacks %q on stderr:\n%s", want, logs)
	}
	if st := f.workerStatus(w.ID); st != "inactive" {
		t.Fatalf("killed worker is %s, want inactive", st)
	}

	if code, e := workerCall(t, f.url, workerToken, spooledSecret(t, p), "POST", "/worker/heartbeat", map[string]string{"worker_id": w.ID}, nil); code != 200 {
		t.Fatalf("heartbeat of an inactive worker: %d %s", code, e)
	}
	if st := f.workerStatus(w.ID); st != "active" {
		t.Fatalf("worker after a heartbeat is %s, want active", st)
	}
}

// restartableServer is a server a test shuts down and starts again on the
// same port and data directory.
type restartableServer struct {
	t   *testing.T
	cfg *config.Server
	srv *testServer
	url string
}

func startRestartable(t *testing.T, workspaces map[string]string, tweak ...func(*config.Server)) *restartableServer {
	t.Helper()
	r := &restartableServer{t: t, cfg: testServerConfig(t, workspaces, 0, tweak...)}
	r.start()
	r.cfg.Listen = r.srv.Addr()
	r.url = "http://" + r.srv.Addr()
	t.Cleanup(func() {
		if r.srv != nil {
			r.stop()
		}
	})
	return r
}

func (r *restartableServer) start() {
	r.t.Helper()
	srv, err := startServer(context.Background(), r.cfg, testLogger(r.t))
	if err != nil {
		r.t.Fatal(err)
	}
	r.srv = srv
}

func (r *restartableServer) stop() {
	r.t.Helper()
	if err := r.srv.Shutdown(); err != nil {
		r.t.Errorf("shutdown: %v", err)
	}
	r.srv = nil
	// The stopped server's keep-alive connections may still sit idle in
	// the shared client's pool, their close not yet seen: the next POST
	// would go out on one and fail with EOF (a POST is not retried).
	testClient.CloseIdleConnections()
}

func (r *restartableServer) fixture() *serverFixture {
	return &serverFixture{t: r.t, srv: r.srv, url: r.url}
}

func TestRemoteStepSurvivesAServerRestart(t *testing.T) {
	ws := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	// The step runs until the test opens the gate, so it is surely running
	// across the restart.
	writeWorkspace(t, ws, fmt.Sprintf(`
tasks:
  gated:
    flow:
      work:
        type: script
        script: |
          echo waiting
          while [ ! -e %q ]; do sleep 0.05; done
          echo done
      next:
        depends_on: [work]
        type: script
        script: echo next
`, gate))
	r := startRestartable(t, map[string]string{"main": ws}, func(c *config.Server) {
		c.WorkerToken = workerToken
		c.Effective.HeartbeatTimeout = 2 * time.Second
	})
	f := r.fixture()
	p := startWorkerProcess(t, r.url, workerToken, "steady", "")
	w := f.worker("steady")
	id := f.execute("main", "gated", nil)
	f.waitJob(id, "the step to start", func(jobView) bool { return strings.Contains(f.logs(id, "work"), "waiting") })

	r.stop()
	// The step ends while the server is down: the worker must hold its
	// report and retry until the server is back.
	writeFile(t, gate, "")
	waitUntil(t, "the worker to retry its reports", func() bool {
		return strings.Contains(p.stderr.String(), "failed; retrying")
	})
	r.start()
	f = r.fixture()

	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job after a server restart: %s: %+v", j.Status, j.Steps)
	}
	for _, name := range []string{"work", "next"} {
		if s := j.step(name); s.Status != "completed" || s.WorkerID == nil || *s.WorkerID != w.ID {
			t.Fatalf("%s: %+v, want completed by the same worker %s", name, s, w.ID)
		}
	}
	if logs := f.logs(id, "work"); !strings.Contains(logs, `"line":"done"`) {
		t.Fatalf("the line printed while the server was down is lost: %q", logs)
	}
	if st := f.workerStatus(w.ID); st != "active" {
		t.Fatalf("worker after the restart is %s, want active", st)
	}
}

func TestRemoteWorkerProcessExitsOnAWrongToken(t *testing.T) {
	f, _ := remoteFixture(t, "tasks: {}\n")
	p := startWorkerProcess(t, f.url, "not-the-token", "intruder", "")
	if code := p.wait(20 * time.Second); code == 0 {
		t.Fatalf("worker with a wrong token exited 0")
	}
	if s := p.stderr.String(); !strings.Contains(s, "worker token rejected by server") {
		t.Fatalf("stderr lacks the rejection:\n%s", s)
	}
	if ws := f.workers(); len(ws) != 0 {
		t.Fatalf("a worker with a wrong token registered: %+v", ws)
	}
}

func TestCompleteFromAnotherWorkerIsRefused(t *testing.T) {
	f, id, _, _ := sleepOnRemoteWorker(t, "holder")
	holder := f.worker("holder")

	var reg struct {
		WorkerID string `json:"worker_id"`
		Secret   string `json:"worker_secret"`
	}
	if code, e := workerCall(t, f.url, workerToken, "", "POST", "/worker/register", map[string]any{"name": "forger", "tags": []string{}, "want_secret": true}, &reg); code != 200 {
		t.Fatalf("register: %d %s", code, e)
	}
	forged := map[string]any{"worker_id": reg.WorkerID, "output": map[string]any{"forged": true}, "exit_code": 0, "error": nil}
	code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/"+id+"/steps/wait/complete", forged, nil)
	if code != http.StatusConflict || e == "" {
		t.Fatalf("forged complete: %d %q, want 409 with an error", code, e)
	}
	// Naming the holder does not help without the holder's secret.
	forged["worker_id"] = holder.ID
	code, e = workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/"+id+"/steps/wait/complete", forged, nil)
	if code != http.StatusForbidden || !strings.Contains(e, holder.ID) {
		t.Fatalf("complete forged as the holder: %d %q, want 403 naming it", code, e)
	}
	if s := f.job(id).step("wait"); s.Status != "running" || s.WorkerID == nil || *s.WorkerID != holder.ID || s.Output != nil {
		t.Fatalf("step after a forged complete: %+v, want still running on %s", s, holder.ID)
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	f.waitTerminal(id)
}

// workerDetailView is GET /api/workers/{id}.
type workerDetailView = wire.WorkerDetail

func TestWorkerListingShowsRemoteWorkersAndTheirSteps(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  mixed:
    flow:
      good:
        type: script
        script: echo fine
      bad:
        depends_on: [good]
        type: script
        script: exit 3
`)
	// No daemon at that endpoint, so the tags are exactly the configured ones.
	startWorkerProcess(t, f.url, workerToken, "lister", "tags: [linux, build]\ndocker: {endpoint: \"unix:///nonexistent/docker.sock\"}\n")
	id := f.execute("main", "mixed", nil)
	if j := f.waitTerminal(id); j.Status != "failed" {
		t.Fatalf("job %s, want failed", j.Status)
	}

	var raw struct {
		Items []map[string]any `json:"items"`
		Total int              `json:"total"`
	}
	do(t, "GET", f.url+"/api/workers", nil, &raw)
	if raw.Total != 1 || len(raw.Items) != 1 {
		t.Fatalf("workers: total %d, items %v; want the one worker", raw.Total, raw.Items)
	}
	for _, k := range []string{"id", "name", "tags", "status", "last_seen"} {
		if _, ok := raw.Items[0][k]; !ok {
			t.Errorf("worker item lacks %q: %v", k, raw.Items[0])
		}
	}
	w := f.worker("lister")
	if tags := strings.Join(w.Tags, ","); (tags != "build,linux" && tags != "linux,build") || w.Status != "active" ||
		time.Since(w.LastSeen) > time.Minute || w.LastSeen.Location() != time.UTC {
		t.Fatalf("worker item %+v", w)
	}

	var rawDetail map[string]any
	do(t, "GET", f.url+"/api/workers/"+w.ID, nil, &rawDetail)
	items, _ := rawDetail["steps"].(map[string]any)["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("worker detail steps: %v", rawDetail["steps"])
	}
	for _, it := range items {
		for _, k := range []string{"job_id", "workspace", "task_name", "job_status", "step_name", "action_type", "status", "started_at", "completed_at", "error_message"} {
			if _, ok := it.(map[string]any)[k]; !ok {
				t.Errorf("worker step record lacks %q: %v", k, it)
			}
		}
	}

	var d workerDetailView
	do(t, "GET", f.url+"/api/workers/"+w.ID, nil, &d)
	if d.ID != w.ID || d.Name != "lister" || d.Steps.Total != 2 {
		t.Fatalf("worker detail %+v", d)
	}
	byStep := map[string]int{}
	for i, s := range d.Steps.Items {
		byStep[s.StepName] = i
		if s.JobID != id || s.Workspace != "main" || s.TaskName != "mixed" || s.JobStatus != "failed" ||
			s.ActionType != "script" || s.StartedAt == nil || s.CompletedAt == nil {
			t.Errorf("worker step record %+v", s)
		}
	}
	good, bad := d.Steps.Items[byStep["good"]], d.Steps.Items[byStep["bad"]]
	if good.Status != "completed" || good.ErrorMessage != nil {
		t.Errorf("good step record %+v", good)
	}
	if bad.Status != "failed" || bad.ErrorMessage == nil || !strings.HasPrefix(*bad.ErrorMessage, "Exit code: 3") {
		t.Errorf("bad step record %+v (error %q)", bad, deref(bad.ErrorMessage))
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// workerProc is a real `appliance worker` process started from the built
// binary.
type workerProc struct {
	t      testing.TB
	name   string
	cache  string // its workspace_cache_dir
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	code   int // exit code, once exited is closed
}

// fastIntervals make worker processes heartbeat and push logs every 100ms,
// so tests about liveness and live logs run quickly.
const fastIntervals = "heartbeat_interval: 100ms\nlog_push_interval: 100ms\n"

// startWorkerProcess runs `appliance worker` against url with fast
// intervals plus the extra YAML, and stops it (SIGTERM, then SIGKILL) when
// the test ends.
func startWorkerProcess(t testing.TB, url, token, name, extra string) *workerProc {
	t.Helper()
	return spawnWorker(t, url, token, name, fastIntervals+extra)
}

// spawnWorker runs `appliance worker` with exactly the given settings
// besides the server, token, name, cache dir and a short drain timeout.
func spawnWorker(t testing.TB, url, token, name, settings string) *workerProc {
	t.Helper()
	bin := binary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "worker-config.yaml")
	cache := filepath.Join(dir, "cache")
	cfg := fmt.Sprintf("server_url: %s\nworker_token: %s\nworker_name: %s\nworkspace_cache_dir: %s\ndrain_timeout: 2s\n%s",
		url, token, name, cache, settings)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &workerProc{t: t, name: name, cache: cache, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	p.cmd = exec.Command(bin, "worker", "--config", path)
	// Step files fall back to $TMPDIR without /dev/shm: keep them in the test's.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	p.start()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("worker %s stderr:\n%s", name, p.stderr.String())
		}
	})
	return p
}

// start runs p.cmd (a fresh copy of it, after the first run).
func (p *workerProc) start() {
	p.t.Helper()
	if p.cmd.Process != nil {
		cmd := exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
		cmd.Env = p.cmd.Env
		p.cmd = cmd
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	exited, cmd := make(chan struct{}), p.cmd
	p.exited = exited
	go func() {
		_ = cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(exited)
	}()
}

// restart runs the worker again with the same config file, and so the same
// cache and spool, once it has exited.
func (p *workerProc) restart() {
	p.t.Helper()
	<-p.exited
	p.start()
}

// stop ends the worker gracefully, or kills it if it does not drain in time.
func (p *workerProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.t.Errorf("worker %s did not stop on SIGTERM", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// wait returns the exit code once the process has ended by itself.
func (p *workerProc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.code
	case <-time.After(d):
		p.t.Fatalf("worker %s still running after %s; stderr:\n%s", p.name, d, p.stderr.String())
		return -1
	}
}

// workerInfo is an item of GET /api/workers.
type workerInfo = wire.Worker

func (f *serverFixture) workers() []workerInfo {
	f.t.Helper()
	var out struct {
		Items []workerInfo `json:"items"`
	}
	if code := do(f.t, "GET", f.url+"/api/workers", nil, &out); code != 200 {
		f.t.Fatalf("GET /api/workers: %d", code)
	}
	return out.Items
}

// worker waits until a worker of that name has registered and returns it.
func (f *serverFixture) worker(name string) workerInfo {
	f.t.Helper()
	var found workerInfo
	waitUntil(f.t, "worker "+name+" to register", func() bool {
		for _, w := range f.workers() {
			if w.Name == name {
				found = w
				return true
			}
		}
		return false
	})
	return found
}

func (f *serverFixture) workerStatus(id string) string {
	f.t.Helper()
	var w workerInfo
	if code := do(f.t, "GET", f.url+"/api/workers/"+id, nil, &w); code != 200 {
		f.t.Fatalf("GET /api/workers/%s: %d", id, code)
	}
	return w.Status
}

// spooledSecret is the secret a worker process proves itself with, read
// where the worker keeps it across restarts: with each step run in its
// spool.
func spooledSecret(t *testing.T, w *workerProc) string {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(w.cache, ".spool", w.name, "*", "run.json"))
	if err != nil || len(runs) == 0 {
		t.Fatalf("no step run in the spool of %s (%v)", w.name, err)
	}
	raw, err := os.ReadFile(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Secret string `json:"worker_secret"`
	}
	if err := json.Unmarshal(raw, &run); err != nil || run.Secret == "" {
		t.Fatalf("run %s holds no worker_secret (%v): %s", runs[0], err, raw)
	}
	return run.Secret
}

// workerCall is a raw request to a /worker endpoint with the given token
// and worker secret ("" for none),
// returning the status and the body's "error" (if any).
func workerCall(t testing.TB, url, token, secret, method, path string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if secret != "" {
		req.Header.Set(workerproto.SecretHeader, secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, e.Error
}

// uniqueSleep is a `sleep` command line no other test (or concurrent test
// run) uses, so its process can be found in /proc without ambiguity.
// sleepOnRemoteWorker runs a one-step job whose step ("wait") sleeps on a
// remote worker process named name, and returns once the sleep runs: the
// fixture, the job id, the sleep's command line and its process group.
func sleepOnRemoteWorker(t *testing.T, name string) (f *serverFixture, jobID, sleep string, pgid int) {
	t.Helper()
	sleep = uniqueSleep()
	f, _ = remoteFixture(t, `
tasks:
  slow:
    flow:
      wait:
        type: script
        script: |
          echo started
          `+sleep+`
`)
	startWorkerProcess(t, f.url, workerToken, name, "")
	jobID = f.execute("main", "slow", nil)
	pgid = waitSleepProcess(t, sleep)
	killAtCleanup(t, sleep)
	return f, jobID, sleep, pgid
}

func uniqueSleep() string {
	return fmt.Sprintf("sleep 300.%d%04d", os.Getpid(), sleepSeq.Add(1))
}

var sleepSeq atomic.Int64

// killAtCleanup kills the process group running cmdline when the test
// ends: a worker killed with SIGKILL leaves its steps' processes behind.
func killAtCleanup(t testing.TB, cmdline string) {
	t.Cleanup(func() {
		// Looked up again, so a finished group's recycled id is never hit.
		pgid, err := findProcessGroup(cmdline)
		if err != nil {
			return
		}
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Logf("kill process group %d: %v", pgid, err)
		}
	})
}

// logLines parses JSONL log text.
func logLines(t testing.TB, text string) []logLine {
	t.Helper()
	var out []logLine
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l == "" {
			continue
		}
		var ll logLine
		if err := json.Unmarshal([]byte(l), &ll); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, ll)
	}
	return out
}

type logLine struct {
	TS     time.Time `json:"ts"`
	Stream string    `json:"stream"`
	Step   string    `json:"step"`
	Line   string    `json:"line"`
}

// hasLine reports whether the JSONL log has exactly this line of step on stream.
func hasLine(t testing.TB, text, step, stream, line string) bool {
	t.Helper()
	for _, l := range logLines(t, text) {
		if l.Step == step && l.Stream == stream && l.Line == line {
			return true
		}
	}
	return false
}

// TestLostClaimAnswerIsRecoveredFromHeartbeats claims a step over raw HTTP
// as if its answer never arrived: the worker's heartbeats do not name it,
// so the server makes it ready again and a real worker runs it.
func TestLostClaimAnswerIsRecoveredFromHeartbeats(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  once:
    flow:
      only:
        type: script
        script: echo ran once
`, func(c *config.Server) { c.Effective.HeartbeatTimeout = 600 * time.Millisecond })
	var reg struct {
		WorkerID string `json:"worker_id"`
		Secret   string `json:"worker_secret"`
	}
	if code, e := workerCall(t, f.url, workerToken, "", "POST", "/worker/register", map[string]any{"name": "flaky", "tags": []string{}, "want_secret": true}, &reg); code != 200 {
		t.Fatalf("register: %d %s", code, e)
	}
	id := f.execute("main", "once", nil)
	var claim struct {
		JobID    string `json:"job_id"`
		StepName string `json:"step_name"`
	}
	if code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/claim?wait=1", map[string]any{"worker_id": reg.WorkerID, "tags": []string{}}, &claim); code != 200 || claim.JobID != id {
		t.Fatalf("claim: %d %s %+v", code, e, claim)
	}

	// The flaky worker heartbeats without the step until the server gives
	// the step up (a third of the heartbeat timeout after the claim). The
	// job detail shows the step ready all along (a claim is stored only
	// with its start report): the _server line says when it was given up.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(f.logs(id, "_server"), "worker flaky never received its claim") {
		if time.Now().After(deadline) {
			t.Fatalf("step still %s after heartbeats without it", f.job(id).step("only").Status)
		}
		if code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/heartbeat", map[string]any{"worker_id": reg.WorkerID, "running": []any{}}, nil); code != 200 {
			t.Fatalf("heartbeat: %d %s", code, e)
		}
		time.Sleep(50 * time.Millisecond)
	}

	startWorkerProcess(t, f.url, workerToken, "steady", "")
	j := f.waitTerminal(id)
	steady := f.worker("steady")
	if j.Status != "completed" || j.step("only").WorkerID == nil || *j.step("only").WorkerID != steady.ID {
		t.Fatalf("job %s, step on %v; want completed on the steady worker %s", j.Status, j.step("only").WorkerID, steady.ID)
	}
	if logs := f.logs(id, "_server"); !strings.Contains(logs, "worker flaky never received its claim") {
		t.Fatalf("_server log: %s", logs)
	}
}
