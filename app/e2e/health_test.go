package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// opsStatus is /healthz's and /readyz's answer.
type opsStatus struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

func (f *serverFixture) probe(path string) (int, opsStatus) {
	f.t.Helper()
	code, st, err := tryProbe(f.url + path)
	if err != nil {
		f.t.Fatal(err)
	}
	return code, st
}

// tryProbe is probe without failing the test on a network error.
func tryProbe(url string) (int, opsStatus, error) {
	var st opsStatus
	resp, err := testClient.Get(url)
	if err != nil {
		return 0, st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return resp.StatusCode, st, err
	}
	return resp.StatusCode, st, nil
}

const oneStepWorkspace = `tasks:
  hi:
    flow:
      s: {type: script, script: echo hi}
`

// TestCorruptRecordStopsServeNamingIt writes garbage over a live job's
// record in the real bbolt file: `appliance serve` must refuse to start,
// exit non-zero and name the record, instead of serving while refusing
// every job.
func TestCorruptRecordStopsServeNamingIt(t *testing.T) {
	// No workers: the job stays ready, so the next start loads it.
	p := startBinaryServer(t, oneStepWorkspace, 0)
	f := &serverFixture{t: t, url: "http://" + p.addr}
	id := f.execute("ws", "hi", nil)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("first server did not stop cleanly: %v", err)
	}

	db, err := bolt.Open(filepath.Join(p.args[1], "appliance.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("jobs")).Put([]byte(id), []byte("{garbage")) })
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(p.bin, append([]string{"serve", "--listen", p.addr}, p.args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("serve on a corrupt store did not exit; stderr:\n%s", stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve on a corrupt store: %v, want a non-zero exit; stderr:\n%s", err, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "decode job "+id) {
		t.Fatalf("the error does not name the corrupt record (job %s):\n%s", id, msg)
	}
	t.Logf("exit %d: %s", exit.ExitCode(), strings.TrimSpace(msg))
	if code, err := tryDo("GET", "http://"+p.addr+"/healthz", "", nil); err == nil {
		t.Fatalf("something still answers /healthz (%d) after a failed start", code)
	}
}

func TestHealthzNeedsAWritableDatabase(t *testing.T) {
	f := startFixture(t, nil, 0)
	if code, st := f.probe("/healthz"); code != 200 || st.Status != "ok" {
		t.Fatalf("healthz of a fresh server: %d %+v", code, st)
	}
	// A database that refuses writes under a live server: closed here, as
	// a failed disk would leave it. The loop still answers.
	if err := f.srv.db.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "healthz to fail", func() bool { code, _ := f.probe("/healthz"); return code != 200 })
	code, st := f.probe("/healthz")
	if code != 503 || st.Status != "unavailable" || !strings.Contains(st.Error, "database refuses writes") {
		t.Fatalf("healthz with the database closed: %d %+v, want 503 naming the database", code, st)
	}
}

func TestHealthzNeedsTheOrchestratorLoop(t *testing.T) {
	f := startFixture(t, nil, 0)
	if code, _ := f.probe("/healthz"); code != 200 {
		t.Fatalf("healthz of a fresh server: %d", code)
	}
	f.srv.stopOrchestrator()
	waitUntil(t, "healthz to fail", func() bool { code, _ := f.probe("/healthz"); return code == 503 })
	if _, st := f.probe("/healthz"); !strings.Contains(st.Error, "orchestrator loop does not answer") {
		t.Fatalf("healthz with the loop stopped: %+v, want it named", st)
	}
}

// TestOrchestratorFailureStopsTheServer makes the orchestrator fail at
// run time (a commit and the reload after it both fail): the supervisor
// reports it, and Shutdown returns the failure naming the component, which
// `appliance serve` prints before exiting 1.
func TestOrchestratorFailureStopsTheServer(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, oneStepWorkspace)
	cfg := testServerConfig(t, map[string]string{"ws": ws}, 0)
	srv, err := startServer(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	select {
	case <-srv.Failed():
		t.Fatal("a fresh server reports a failure")
	default:
	}
	if err := srv.db.Close(); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if code := do(t, "POST", f.url+"/api/workspaces/ws/tasks/hi/execute", `{}`, &out); code == 200 {
		t.Fatalf("a job was acknowledged with the database closed: %v", out)
	}
	select {
	case <-srv.Failed():
	case <-time.After(20 * time.Second):
		t.Fatal("the orchestrator's failure did not stop the server")
	}
	err = srv.Shutdown()
	if err == nil || !strings.Contains(err.Error(), "orchestrator: reload state after failed commit") {
		t.Fatalf("Shutdown after the failure: %v, want the orchestrator's failure", err)
	}
}

const napWorkspace = `tasks:
  nap:
    flow:
      s: {type: script, script: "sleep 1.5; echo rested"}
`

// TestReadyzFollowsStartupAndShutdown: /readyz is ok once the in-process
// pool has registered, and unavailable while the server drains.
func TestReadyzFollowsStartupAndShutdown(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, napWorkspace)
	cfg := testServerConfig(t, map[string]string{"ws": ws}, 1)
	srv, err := startServer(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &serverFixture{t: t, srv: srv, url: "http://" + srv.Addr()}
	waitUntil(t, "readyz", func() bool { code, _ := f.probe("/readyz"); return code == 200 })
	var workers struct {
		Total int `json:"total"`
	}
	do(t, "GET", f.url+"/api/workers", nil, &workers)
	if workers.Total != 1 {
		t.Fatalf("ready with %d workers registered, want the in-process pool", workers.Total)
	}

	id := f.execute("ws", "nap", nil)
	f.waitJob(id, "the step to run", func(j jobView) bool { return j.step("s").Status == "running" })
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Shutdown() }()
	// The HTTP server answers until the workers have drained the step.
	st := waitFor(t, "readyz to say shutting down", func() opsStatus { _, st, _ := tryProbe(f.url + "/readyz"); return st },
		func(st opsStatus) bool { return st.Status == "unavailable" })
	if st.Error != "shutting down" {
		t.Fatalf("readyz while draining: %+v", st)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
