package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary compiles the appliance binary once per test run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "appliance-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "appliance")
	out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// binary is the built appliance binary for a test that runs it; such
// tests are skipped with -short.
func binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs `appliance serve` as a real process and waits until it
// answers. args must name a --data-dir (the logs default to its "logs"
// folder); $TMPDIR is kept beside it, so nothing the server or its steps
// write lands outside the test's directory.
func startProcess(t testing.TB, bin, addr string, args ...string) *exec.Cmd {
	t.Helper()
	tmp := ""
	for i, a := range args {
		if a == "--data-dir" && i+1 < len(args) {
			tmp = filepath.Join(filepath.Dir(args[i+1]), "tmp")
		}
	}
	if tmp == "" {
		t.Fatal("startProcess needs --data-dir")
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout = testWriter{t}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/api/config")
		if err == nil {
			resp.Body.Close()
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s did not come up: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const crashWorkspace = `tasks:
  work:
    flow:
      first:
        type: script
        script: sleep 0.05
      second:
        depends_on: [first]
        type: script
        script: echo done
`

// TestKillNineLosesNoAcknowledgedJob kills the server with SIGKILL while
// jobs are being submitted and run (mid-burst of execute calls), restarts it on the same data dir, and
// checks every job whose creation was acknowledged still exists and ends.
func TestKillNineLosesNoAcknowledgedJob(t *testing.T) { killNineLosesNoAcknowledgedJob(t) }

// killNineLosesNoAcknowledgedJob is the test on a server started with
// args added to its flags (its storage); it returns the acknowledged jobs.
func killNineLosesNoAcknowledgedJob(t *testing.T, args ...string) []string {
	p := startBinaryServer(t, crashWorkspace, 4, args...)
	server, addr := p.cmd, p.addr

	// Clients send execute calls back to back until the server is gone,
	// so the kill lands mid-burst: calls are in flight when it dies, and
	// some are never answered.
	const clients, killAt = 16, 50
	var (
		mu         sync.Mutex
		acked      []string
		unanswered int
		wg         sync.WaitGroup
		killOnce   sync.Once
	)
	kill := func() { killOnce.Do(func() { _ = server.Process.Signal(syscall.SIGKILL) }) }
	deadline := time.Now().Add(time.Minute)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				var out struct {
					JobID string `json:"job_id"`
				}
				code, err := tryDo("POST", "http://"+addr+"/api/workspaces/ws/tasks/work/execute", `{"input": {}}`, &out)
				if err != nil { // the server is gone
					mu.Lock()
					unanswered++
					mu.Unlock()
					return
				}
				if code != 200 {
					continue
				}
				mu.Lock()
				acked = append(acked, out.JobID)
				n := len(acked)
				mu.Unlock()
				if n == killAt {
					kill()
				}
			}
		}()
	}
	wg.Wait()
	kill()
	_ = server.Wait()
	if len(acked) < killAt || unanswered == 0 {
		t.Fatalf("%d jobs acknowledged, %d calls unanswered: the kill did not land mid-burst", len(acked), unanswered)
	}

	p.restart()
	f := &serverFixture{t: t, url: "http://" + addr}
	for _, id := range acked {
		j := f.waitTerminal(id)
		if j.JobID != id {
			t.Fatalf("job %s missing after restart", id)
		}
	}
	var list struct {
		Total int `json:"total"`
	}
	do(t, "GET", f.url+"/api/jobs?limit=1", nil, &list)
	if list.Total < len(acked) {
		t.Fatalf("job list total %d < %d acknowledged jobs", list.Total, len(acked))
	}
	t.Logf("%d jobs acknowledged before kill -9 (%d calls unanswered); all present and terminal after restart (%d listed)", len(acked), unanswered, list.Total)
	return acked
}

// binaryServer is `appliance serve` running as a real process on a
// workspace of its own, restartable on the same data dir and port.
type binaryServer struct {
	t    testing.TB
	bin  string
	addr string
	args []string
	cmd  *exec.Cmd
}

// startBinaryServer runs `appliance serve` on workspaceYAML (as workspace
// "ws") with the given in-process worker slots; args are added to its flags.
func startBinaryServer(t testing.TB, workspaceYAML string, workers int, args ...string) *binaryServer {
	t.Helper()
	bin := binary(t)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	writeWorkspace(t, ws, workspaceYAML)
	p := &binaryServer{t: t, bin: bin, addr: freePort(t),
		args: append([]string{"--data-dir", filepath.Join(dir, "data"), "--workspace", ws, "--workers", strconv.Itoa(workers)}, args...)}
	p.restart()
	return p
}

// restart starts the server (again) and waits until it answers.
func (p *binaryServer) restart() {
	p.t.Helper()
	p.cmd = startProcess(p.t, p.bin, p.addr, p.args...)
}

func writeWorkspace(t testing.TB, dir, yaml string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, ".workflows"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".workflows", "main.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

const drainWorkspace = `tasks:
  slow:
    flow:
      nap:
        type: script
        script: sleep 0.5; echo rested
`

// TestSigtermLetsRunningStepsFinish stops the server with SIGTERM while a
// step runs: the server exits cleanly after the step finished, and the job
// is completed when it comes back.
func TestSigtermLetsRunningStepsFinish(t *testing.T) {
	p := startBinaryServer(t, drainWorkspace, 1)
	server, addr := p.cmd, p.addr
	f := &serverFixture{t: t, url: "http://" + addr}

	id := f.execute("ws", "slow", nil)
	f.waitJob(id, "the step to run", func(j jobView) bool { return j.step("nap").Status == "running" })
	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("server exited with %v after SIGTERM, want a clean exit", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not exit after SIGTERM")
	}

	p.restart()
	j := f.job(id)
	if j.Status != "completed" || j.step("nap").Status != "completed" {
		t.Fatalf("after a graceful stop: job %s, step %s; want both completed", j.Status, j.step("nap").Status)
	}
	if logs := f.logs(id, "nap"); !strings.Contains(logs, "rested") {
		t.Fatalf("the drained step's log is missing its output: %q", logs)
	}
}
