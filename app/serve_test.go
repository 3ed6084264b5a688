package app

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The example workspace, as `go run . serve` serves it.
var examples = map[string]string{"examples": "../examples"}

func TestHelloWorldPassesOutputToTheNextStep(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "hello-world", map[string]any{"name": "Ada"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s: %+v", j.Status, j.Steps)
	}
	first := j.step("say-hello")
	if out, _ := first.Output.(map[string]any); out["greeting"] != "Hello, Ada!" {
		t.Fatalf("say-hello output = %#v", first.Output)
	}
	if got := j.step("echo-greeting").Input["greeting"]; got != "Hello, Ada!" {
		t.Fatalf("echo-greeting input = %#v", got)
	}
	if logs := f.logs(id, "echo-greeting"); !strings.Contains(logs, "the first step said: Hello, Ada!") {
		t.Fatalf("echo-greeting log does not show the passed output:\n%s", logs)
	}
	if logs := f.logs(id, ""); !strings.Contains(logs, `"step":"say-hello"`) || !strings.Contains(logs, `"step":"echo-greeting"`) {
		t.Fatalf("job log lacks a step's lines:\n%s", logs)
	}
}

func TestFailingPythonStepReportsTheException(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "pipeline", map[string]any{"fail_tests": true})
	j := f.waitTerminal(id)
	if j.Status != "failed" {
		t.Fatalf("job status %s, want failed", j.Status)
	}
	tests := j.step("unit-tests")
	if tests.Status != "failed" || tests.ErrorMessage == nil {
		t.Fatalf("unit-tests: %+v", tests)
	}
	if msg := *tests.ErrorMessage; !strings.Contains(msg, "RuntimeError: the unit suite failed on purpose") || !strings.HasPrefix(msg, "Exit code: 1") {
		t.Fatalf("error_message lacks the exit code or the exception:\n%s", msg)
	}
	if b := j.step("build"); b.Status != "skipped" {
		t.Fatalf("build after a failed test run: %s, want skipped", b.Status)
	}
}

func TestPipelineFansOutAndSkipsDeployOnDryRun(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "pipeline", map[string]any{"targets": "linux,darwin,windows"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job status %s: %+v", j.Status, j.Steps)
	}
	for i := 0; i < 3; i++ {
		if s := j.step("build[" + strconv.Itoa(i) + "]"); s.Status != "completed" {
			t.Fatalf("build[%d]: %+v", i, s)
		}
	}
	if outs, _ := j.step("build").Output.([]any); len(outs) != 3 {
		t.Fatalf("build output = %#v, want 3 aggregated outputs", j.step("build").Output)
	}
	if d := j.step("deploy"); d.Status != "skipped" {
		t.Fatalf("deploy on a dry run: %s, want skipped", d.Status)
	}
}

func TestCancelKillsTheRunningProcess(t *testing.T) {
	f := startFixture(t, examples, 2)
	id := f.execute("examples", "sleep", map[string]any{"seconds": 300})
	f.waitJob(id, "the sleep step to start", func(j jobView) bool { return j.step("sleep").Status == "running" })

	// The sleep runs under bash in its own process group; find it.
	pgid := waitSleepProcess(t, "sleep 300")
	var out struct {
		Status string `json:"status"`
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, &out); code != 200 || out.Status != "cancelled" {
		t.Fatalf("cancel: %d %+v", code, out)
	}
	j := f.waitTerminal(id)
	if j.Status != "cancelled" || j.step("sleep").Status != "cancelled" {
		t.Fatalf("after cancel: job %s, step %s", j.Status, j.step("sleep").Status)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still alive after cancel", pgid)
		}
		time.Sleep(20 * time.Millisecond)
	}

	var errBody struct {
		Error string `json:"error"`
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+id+"/cancel", nil, &errBody); code != 409 || errBody.Error == "" {
		t.Fatalf("second cancel: %d %+v, want 409 with an error", code, errBody)
	}
}

// waitSleepProcess finds the process group of the process running cmdline.
func waitSleepProcess(t *testing.T, cmdline string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pgid, err := findProcessGroup(cmdline); err == nil {
			return pgid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process %q found", cmdline)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var statFields = regexp.MustCompile(`^\d+ \(.*\) \S+ \d+ (\d+)`)

func findProcessGroup(cmdline string) (int, error) {
	pids, err := procPIDs()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		cmd, err := readProc(pid, "cmdline")
		if err != nil || strings.ReplaceAll(strings.TrimRight(cmd, "\x00"), "\x00", " ") != cmdline {
			continue
		}
		stat, err := readProc(pid, "stat")
		if err != nil {
			continue
		}
		if m := statFields.FindStringSubmatch(stat); m != nil {
			return strconv.Atoi(m[1])
		}
	}
	return 0, errors.New("not found")
}

func TestExecuteAppliesDefaultsAndRejectsMissingRequiredInput(t *testing.T) {
	f := startFixture(t, examples, 0)
	var errBody struct {
		Error string `json:"error"`
	}
	code := do(t, "POST", f.url+"/api/workspaces/examples/tasks/release/execute", map[string]any{"input": map[string]any{}}, &errBody)
	if code != 400 || !strings.Contains(errBody.Error, `"version"`) {
		t.Fatalf("missing required input: %d %q, want 400 naming the field", code, errBody.Error)
	}

	id := f.execute("examples", "release", map[string]any{"version": "1.2.3"})
	j := f.job(id)
	if j.Input["channel"] != "stable" || j.Input["version"] != "1.2.3" {
		t.Fatalf("job input %v, want the default channel filled in", j.Input)
	}
	if j.Status != "pending" {
		t.Fatalf("job without workers: %s, want pending", j.Status)
	}

	for _, c := range []struct {
		path string
		code int
	}{
		{"/api/workspaces/nope/tasks/release/execute", 404},
		{"/api/workspaces/examples/tasks/nope/execute", 404},
	} {
		if got := do(t, "POST", f.url+c.path, `{"input": {}}`, &errBody); got != c.code || errBody.Error == "" {
			t.Errorf("POST %s: %d %q, want %d with an error", c.path, got, errBody.Error, c.code)
		}
	}
	if got := do(t, "POST", f.url+"/api/workspaces/examples/tasks/release/execute", `{"input": `, &errBody); got != 400 {
		t.Errorf("malformed JSON: %d, want 400", got)
	}
}
