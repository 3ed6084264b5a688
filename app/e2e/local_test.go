package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

const localWorkspace = `tasks:
  build:
    input:
      target: {type: string}
    flow:
      compile:
        type: script
        script: |
          echo compiling for {{ input.target }}
          echo 'OUTPUT: {"artifact": "app-{{ input.target }}.bin"}'
      ship:
        depends_on: [compile]
        type: script
        script: |
          echo shipping {{ compile.output.artifact }} from $(pwd)
          echo 'OUTPUT: {"shipped": "{{ compile.output.artifact }}"}'
  broken:
    flow:
      first:
        type: script
        script: echo about to fail; exit 3
      second:
        depends_on: [first]
        type: script
        script: echo never
`

// runLocalCmd runs `appliance run --local` as a real process and returns
// its exit code, output and the job id it printed.
func runLocalCmd(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"run", "--local", "--workspace", "main", "--server", url}, args...)...)
	cmd.Env = append(os.Environ(), "APPLIANCE_WORKER_TOKEN="+workerToken, "TMPDIR="+t.TempDir(),
		"XDG_CACHE_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("run --local did not end; output:\n%s\n%s", out.String(), errOut.String())
	}
	m := regexp.MustCompile(`job ([0-9a-f-]{36}): running`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("run --local printed no job id (exit %d):\n%s\n%s", cmd.ProcessState.ExitCode(), out.String(), errOut.String())
	}
	return cmd.ProcessState.ExitCode(), out.String() + errOut.String(), m[1]
}

type localJobView struct {
	jobView
	SourceType string         `json:"source_type"`
	SourceID   *string        `json:"source_id"`
	Output     map[string]any `json:"output"`
}

func TestRunLocalRunsTheWholeJobOnThisMachineAndRecordsIt(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, localWorkspace)
	// An idle in-process worker stands by: it would take any ready step
	// offered to workers.
	f := startFixture(t, map[string]string{"main": ws}, 1, func(c *config.Server) { c.WorkerToken = workerToken })

	binary(t) // built before the clock starts
	start := time.Now()
	code, out, id := runLocalCmd(t, f.url, "build", "--input", "target=prod")
	t.Logf("run --local of two dependent steps took %s and said:\n%s", time.Since(start).Round(time.Millisecond), out)
	if code != 0 {
		t.Fatalf("run --local exit %d:\n%s", code, out)
	}
	for _, want := range []string{"[compile] compiling for prod", "[ship] shipping app-prod.bin", "job " + id + " completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --local output lacks %q:\n%s", want, out)
		}
	}
	var j localJobView
	do(t, "GET", f.url+"/api/jobs/"+id, nil, &j)
	if j.Status != "completed" || j.SourceType != "local" || j.SourceID == nil {
		t.Fatalf("local job: status %s, source %s %v", j.Status, j.SourceType, deref(j.SourceID))
	}
	if ship, _ := j.Output["ship"].(map[string]any); ship["shipped"] != "app-prod.bin" {
		t.Fatalf("job output %v, want the ship step's", j.Output)
	}
	for _, s := range j.Steps {
		if s.Status != "completed" || s.WorkerID == nil || *s.WorkerID != *j.SourceID || s.StartedAt == nil {
			t.Fatalf("step %s: %s by %s, want completed by the local worker %s", s.StepName, s.Status, deref(s.WorkerID), *j.SourceID)
		}
	}
	if logs := f.logs(id, "ship"); !strings.Contains(logs, "shipping app-prod.bin") {
		t.Fatalf("the server has not the local step's log: %q", logs)
	}
	// The local job is listed by its source like any other.
	var list struct {
		Total int `json:"total"`
	}
	do(t, "GET", f.url+"/api/jobs?source_type=local", nil, &list)
	if list.Total != 1 {
		t.Fatalf("jobs with source_type local: %d, want 1", list.Total)
	}
	// The steps ran in a copy of the workspace revision, not the folder.
	if strings.Contains(out, "from "+ws+"\n") {
		t.Errorf("a local step ran in the server's workspace folder:\n%s", out)
	}
}

func TestRunLocalFailingStepFailsTheJob(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, localWorkspace)
	f := startFixture(t, map[string]string{"main": ws}, 0, func(c *config.Server) { c.WorkerToken = workerToken })

	code, out, id := runLocalCmd(t, f.url, "broken")
	if code != 1 {
		t.Fatalf("run --local of a failing task: exit %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "step first failed: Exit code: 3") || !strings.Contains(out, "job "+id+" failed") {
		t.Fatalf("run --local output:\n%s", out)
	}
	j := f.job(id)
	if j.Status != "failed" || j.step("first").Status != "failed" || j.step("second").Status != "skipped" && j.step("second").Status != "cancelled" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
}

func TestRunLocalWithAWrongTokenSaysSo(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, localWorkspace)
	f := startFixture(t, map[string]string{"main": ws}, 0, func(c *config.Server) { c.WorkerToken = workerToken })
	cmd := exec.Command(binary(t), "run", "--local", "--workspace", "main", "--server", f.url, "--worker-token", "wrong", "build")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(t.TempDir(), "c"))
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "worker token rejected") {
		t.Fatalf("exit %d: %s", cmd.ProcessState.ExitCode(), out)
	}
}
