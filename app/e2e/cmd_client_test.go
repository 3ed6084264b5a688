package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
)

// The client commands run through Main against a real server with
// in-process workers running real processes.

var jobIDLine = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// client runs a client command against the fixture's server.
func (f *serverFixture) client(args ...string) (int, string, string) {
	return runMain(append(args, "--server", f.url)...)
}

// runHello runs hello-world for Ada to its end and returns the job id.
func runHello(t *testing.T, f *serverFixture) string {
	t.Helper()
	code, out, errOut := f.client("run", "hello-world", "--input", "name=Ada", "--follow")
	if code != 0 {
		t.Fatalf("run hello-world: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	return strings.SplitN(out, "\n", 2)[0]
}

func TestRunFollowPrintsTheLogAndExitsZeroWhenTheJobCompletes(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	code, out, errOut := f.client("run", "hello-world", "--input", "name=Ada", "--follow")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	id := lines[0]
	if !jobIDLine.MatchString(id) {
		t.Fatalf("first line %q is not a job id; stdout:\n%s", id, out)
	}
	for _, want := range []string{
		`(?m)^\d\d:\d\d:\d\d say-hello +\| preparing a greeting for Ada$`,
		`(?m)^\d\d:\d\d:\d\d echo-greeting \| the first step said: Hello, Ada!$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("stdout has no line matching %s:\n%s", want, out)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "job "+id+" completed in ") {
		t.Errorf("last line = %q, want the job's completion", last)
	}
	if j := f.job(id); j.Status != "completed" || j.Input["name"] != "Ada" {
		t.Errorf("job on the server: status %s, input %v", j.Status, j.Input)
	}
}

func TestRunFollowExitsOneWhenTheJobFails(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	code, out, errOut := f.client("run", "pipeline", "--input", "fail_tests=true", "--follow")
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	id := strings.SplitN(out, "\n", 2)[0]
	// stderr lines are marked with "!" in place of "|".
	if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d unit-tests +! RuntimeError: the unit suite failed on purpose$`).MatchString(out) {
		t.Errorf("the python exception is not among the log lines:\n%s", out)
	}
	if !strings.Contains(out, "job "+id+" failed in ") || !strings.Contains(out, "  step unit-tests failed: Exit code: 1") {
		t.Errorf("the outcome does not say which step failed:\n%s", out)
	}
	if j := f.job(id); j.Status != "failed" || j.Input["fail_tests"] != true {
		t.Errorf("job on the server: status %s, input %v (fail_tests must be the boolean true)", j.Status, j.Input)
	}
}

func TestRunMissingRequiredInputExitsOneNamingTheField(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	code, out, errOut := f.client("run", "release")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q; want 1 and nothing", code, out)
	}
	if !strings.HasPrefix(errOut, "appliance: ") || !strings.Contains(errOut, `input "version": required`) {
		t.Errorf("stderr = %q, want the server's error naming the field", errOut)
	}

	code, _, errOut = f.client("run", "no-such-task")
	if code != 1 || !strings.Contains(errOut, `task "no-such-task"`) {
		t.Errorf("unknown task: exit %d, stderr %q", code, errOut)
	}
}

func TestRunWithoutFollowPrintsOnlyTheJobID(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	code, out, errOut := f.client("run", "hello-world", "--input-json", `{"name": "Grace"}`)
	if code != 0 || !jobIDLine.MatchString(strings.TrimSuffix(out, "\n")) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	j := f.waitTerminal(strings.TrimSpace(out))
	if got := j.step("say-hello").Output; fmt.Sprint(got) != "map[greeting:Hello, Grace!]" {
		t.Errorf("say-hello output = %v", got)
	}

	code, out, _ = f.client("run", "hello-world", "--json")
	var created struct {
		JobID string `json:"job_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &created) != nil || created.JobID == "" {
		t.Errorf("--json: exit %d, stdout %q, want the execute answer", code, out)
	}
}

func TestRunFollowJSONPrintsOneJSONValuePerLine(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	code, out, errOut := f.client("run", "hello-world", "--follow", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var created, final struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &created); err != nil || created.JobID == "" {
		t.Fatalf("first line %q is not the execute answer: %v", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &final); err != nil || final.JobID != created.JobID || final.Status != "completed" {
		t.Errorf("last line %q is not the completed job: %v", lines[len(lines)-1], err)
	}
	logs := strings.Join(lines[1:len(lines)-1], "\n")
	if !hasLine(t, logs, "echo-greeting", "stdout", "the first step said: Hello, world!") {
		t.Errorf("the JSONL log lines between are missing:\n%s", out)
	}
}

func TestJobsListsTheJob(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	id := runHello(t, f)

	code, out, errOut := f.client("jobs", "--task", "hello-world")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "JOB ID ") || !regexp.MustCompile(`(?m)^`+id+` +hello-world +completed +api +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +\S+$`).MatchString(out) {
		t.Errorf("no row for job %s:\n%s", id, out)
	}

	code, out, _ = f.client("jobs", "--json", "--workspace", "examples", "--limit", "1")
	var page struct {
		Items []struct {
			JobID string `json:"job_id"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v, stdout %q", code, err, out)
	}
	if len(page.Items) != 1 || page.Items[0].JobID != id || page.Total != 1 {
		t.Errorf("--json page = %+v, want job %s alone", page, id)
	}

	code, out, _ = f.client("jobs", "--workspace", "examples", "--task", "sleep")
	if code != 0 || out != "no jobs\n" {
		t.Errorf("a task never run: exit %d, stdout %q", code, out)
	}
}

func TestLogsPrintsAFinishedJobsLog(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	id := runHello(t, f)

	code, out, errOut := f.client("logs", id)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	// One call sees the whole log, so the step column is aligned.
	if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d say-hello     \| preparing a greeting for Ada$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d echo-greeting \| the first step said: Hello, Ada!$`).MatchString(out) {
		t.Errorf("log:\n%s", out)
	}

	code, out, _ = f.client("logs", "--step", "say-hello", id)
	if code != 0 || strings.Contains(out, "echo-greeting") || !strings.Contains(out, "say-hello | preparing a greeting for Ada") {
		t.Errorf("--step say-hello: exit %d:\n%s", code, out)
	}

	code, out, _ = f.client("logs", id, "--json")
	var answer struct {
		Logs string `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &answer); code != 0 || err != nil || !hasLine(t, answer.Logs, "echo-greeting", "stdout", "the first step said: Hello, Ada!") {
		t.Errorf("--json: exit %d, %v, stdout %q", code, err, out)
	}

	code, _, errOut = f.client("logs", id, "--step", "nope")
	if code != 1 || !strings.Contains(errOut, `step "nope"`) {
		t.Errorf("unknown step: exit %d, stderr %q", code, errOut)
	}
}

// waitForGoWorkspace has a task that logs a line, then waits until the
// file "go" exists in dir, then logs another: the test decides when it ends.
func waitForGoWorkspace(t *testing.T) (wsDir, goFile string) {
	t.Helper()
	wsDir, signalDir := t.TempDir(), t.TempDir()
	goFile = filepath.Join(signalDir, "go")
	writeWorkspace(t, wsDir, fmt.Sprintf(`tasks:
  wait-for-go:
    flow:
      wait:
        type: script
        script: |
          echo "waiting for the go file"
          while [ ! -e %q ]; do sleep 0.02; done
          echo "got the go file"
`, goFile))
	return wsDir, goFile
}

func TestLogsFollowStreamsARunningJobUntilItEnds(t *testing.T) {
	wsDir, goFile := waitForGoWorkspace(t)
	f := startFixture(t, map[string]string{"waiting": wsDir}, 2)
	id := f.execute("waiting", "wait-for-go", nil)

	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- app.Main([]string{"logs", id, "--follow", "--server", f.url}, &stdout, &stderr) }()

	waitUntil(t, "the first line to be streamed", func() bool {
		// The step column widens when a _server line (a job created before
		// the in-process workers registered) comes first.
		return regexp.MustCompile(` wait +\| waiting for the go file`).MatchString(stdout.String())
	})
	select {
	case code := <-exit:
		t.Fatalf("logs --follow returned %d while the job runs; stdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	default:
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("logs --follow did not return after the job ended; stdout:\n%s", stdout.String())
	}
	if out := stdout.String(); !regexp.MustCompile(` wait +\| got the go file`).MatchString(out) {
		t.Errorf("the last line is missing:\n%s", out)
	}
	if j := f.job(id); j.Status != "completed" {
		t.Errorf("job status %s", j.Status)
	}
}

func TestCancelStopsARunningJobAndRefusesAnEndedOne(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	code, out, errOut := f.client("run", "sleep", "--input", "seconds=300")
	if code != 0 {
		t.Fatalf("run sleep: exit %d, stderr %q", code, errOut)
	}
	id := strings.TrimSpace(out)
	f.waitJob(id, "its step running", func(j jobView) bool { return j.step("sleep").Status == "running" })

	code, out, errOut = f.client("cancel", id)
	if code != 0 || out != "cancelled "+id+"\n" {
		t.Fatalf("cancel: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if j := f.waitTerminal(id); j.Status != "cancelled" {
		t.Errorf("status after cancel = %s", j.Status)
	}

	code, out, errOut = f.client("cancel", id)
	if code != 1 || out != "" || !strings.Contains(errOut, "job "+id+" is cancelled") {
		t.Errorf("second cancel: exit %d, stdout %q, stderr %q; want 1 and the 409 text", code, out, errOut)
	}

	code, _, errOut = f.client("cancel", "01234567-89ab-cdef-0123-456789abcdef")
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("unknown job: exit %d, stderr %q", code, errOut)
	}
}

func TestTasksListsOneWorkspaceOrEachOfSeveral(t *testing.T) {
	wsDir, _ := waitForGoWorkspace(t)

	one := startFixture(t, map[string]string{"examples": "../../examples"}, 0)
	code, out, errOut := one.client("tasks")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, row := range []string{
		`(?m)^NAME +FOLDER +TRIGGERS$`,
		`(?m)^hello-world +examples/basics +yes$`,
		`(?m)^release +examples/ci +no$`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("no line matching %s:\n%s", row, out)
		}
	}
	if strings.Contains(out, "workspace ") {
		t.Errorf("a lone workspace needs no heading:\n%s", out)
	}

	two := startFixture(t, map[string]string{"examples": "../../examples", "waiting": wsDir}, 0)
	code, out, _ = two.client("tasks")
	if code != 0 || !strings.Contains(out, "workspace examples:\n") || !regexp.MustCompile(`(?m)^workspace waiting:\nNAME .*\nwait-for-go +- +no$`).MatchString(out) {
		t.Errorf("two workspaces: exit %d:\n%s", code, out)
	}
	code, out, _ = two.client("tasks", "--workspace", "waiting")
	if code != 0 || strings.Contains(out, "hello-world") || !strings.Contains(out, "wait-for-go") {
		t.Errorf("--workspace waiting: exit %d:\n%s", code, out)
	}

	code, out, _ = two.client("tasks", "--json")
	var tasks []struct {
		Name      string `json:"name"`
		Workspace string `json:"workspace"`
	}
	if err := json.Unmarshal([]byte(out), &tasks); code != 0 || err != nil || len(tasks) != 10 {
		t.Fatalf("--json: exit %d, %v, stdout %q; want the 10 tasks of both", code, err, out)
	}

	// run finds the workspace holding the task when there are several.
	code, out, errOut = two.client("run", "release", "--input", "version=1.2.3")
	if code != 0 {
		t.Errorf("run release among two workspaces: exit %d, stderr %q", code, errOut)
	} else {
		// No workers here: the job waits, but it exists in the right place.
		var j struct {
			Workspace string         `json:"workspace"`
			Input     map[string]any `json:"input"`
		}
		do(t, "GET", two.url+"/api/jobs/"+strings.TrimSpace(out), nil, &j)
		if j.Workspace != "examples" || j.Input["version"] != "1.2.3" {
			t.Errorf("release job: workspace %q, input %v", j.Workspace, j.Input)
		}
	}
	code, _, errOut = two.client("run", "no-such-task")
	if code != 1 || !strings.Contains(errOut, `no task "no-such-task" in any workspace (examples, waiting)`) {
		t.Errorf("unknown task among two workspaces: exit %d, stderr %q", code, errOut)
	}
}

func TestWorkersListsTheInProcessWorkers(t *testing.T) {
	// No Docker daemon at that endpoint, so the pool has no capability tags.
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2, func(c *config.Server) {
		c.Docker.Endpoint = "unix:///nonexistent/docker.sock"
	})
	// The in-process pool registers as the server starts, not before it answers.
	waitUntil(t, "the in-process worker to register", func() bool {
		var page struct{ Total int }
		return do(t, "GET", f.url+"/api/workers", nil, &page) == 200 && page.Total > 0
	})
	code, out, errOut := f.client("workers")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^ID +NAME +STATUS +TAGS +LAST SEEN$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^[0-9a-f-]{36} +\S+ +active +- +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(out) {
		t.Errorf("workers:\n%s", out)
	}

	code, out, _ = f.client("workers", "--json")
	var page struct {
		Items []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"items"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || page.Total == 0 || page.Items[0].Status != "active" {
		t.Errorf("--json: exit %d, %v, stdout %q", code, err, out)
	}
}

func TestEveryCommandNamesAnUnreachableServer(t *testing.T) {
	url := "http://" + freePort(t)
	want := "appliance: cannot reach the server at " + url + " (is it running? set --server or APPLIANCE_SERVER)\n"
	id := "01234567-89ab-cdef-0123-456789abcdef"
	for _, args := range [][]string{
		{"tasks"}, {"jobs"}, {"workers"}, {"run", "hello-world"}, {"run", "hello-world", "--workspace", "examples"},
		{"logs", id}, {"logs", id, "--follow"}, {"cancel", id}, {"rerun", id, "--from-failed"},
	} {
		code, out, errOut := runMain(append(args, "--server", url)...)
		if code != 1 || out != "" || errOut != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q", args, code, out, errOut, want)
		}
	}
}

func TestFollowExitCodesSayHowTheJobEnded(t *testing.T) {
	wsDir, _ := waitForGoWorkspace(t)
	f := startFixture(t, map[string]string{"examples": "../../examples", "waiting": wsDir}, 2)

	// run --follow of a job cancelled while it is followed: 130.
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- app.Main([]string{"run", "wait-for-go", "--workspace", "waiting", "--follow", "--server", f.url}, &stdout, &stderr)
	}()
	waitUntil(t, "the waiting step to stream", func() bool { return strings.Contains(stdout.String(), "waiting for the go file") })
	cancelled := strings.SplitN(stdout.String(), "\n", 2)[0]
	if code, out, errOut := f.client("cancel", cancelled); code != 0 {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errOut)
	}
	select {
	case code := <-exit:
		if code != 130 {
			t.Fatalf("run --follow of a cancelled job: exit %d, want 130\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run --follow did not return after the job was cancelled")
	}

	failed := f.execute("examples", "pipeline", map[string]any{"fail_tests": true})
	if j := f.waitTerminal(failed); j.Status != "failed" {
		t.Fatalf("pipeline job is %s, want failed", j.Status)
	}
	completed := runHello(t, f)
	for _, c := range []struct {
		id   string
		want int
	}{{completed, 0}, {failed, 1}, {cancelled, 130}} {
		if code, out, errOut := f.client("logs", c.id, "--follow"); code != c.want {
			t.Errorf("logs --follow of job %s (%s): exit %d, want %d\nstdout:\n%s\nstderr:\n%s", c.id, f.job(c.id).Status, code, c.want, out, errOut)
		}
	}
}

// TestJobsPagesByCursorAndFiltersByStatus: a page with more prints the
// --cursor of the next, which shows the rest; --status and --source filter.
func TestJobsPagesByCursorAndFiltersByStatus(t *testing.T) {
	f := startFixture(t, map[string]string{"examples": "../../examples"}, 2)
	ids := []string{runHello(t, f), runHello(t, f), runHello(t, f)}

	code, out, errOut := f.client("jobs", "--limit", "2", "--status", "completed,failed")
	m := regexp.MustCompile(`(?m)^jobs 1-2 of 3; next page: --cursor (\S+)$`).FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, ids[2]) || !strings.Contains(out, ids[1]) {
		t.Fatalf("first page: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	code, out, _ = f.client("jobs", "--limit", "2", "--status", "completed,failed", "--cursor", m[1])
	if code != 0 || !strings.Contains(out, ids[0]) || strings.Contains(out, ids[1]) || strings.Contains(out, "next page") {
		t.Errorf("second page: exit %d, stdout:\n%s", code, out)
	}
	if code, out, _ = f.client("jobs", "--status", "failed"); code != 0 || out != "no jobs\n" {
		t.Errorf("--status failed: exit %d, stdout %q", code, out)
	}
	if code, out, _ = f.client("jobs", "--source", "webhook"); code != 0 || out != "no jobs\n" {
		t.Errorf("--source webhook: exit %d, stdout %q", code, out)
	}
	if code, _, errOut = f.client("jobs", "--status", "done"); code == 0 || !strings.Contains(errOut, `unknown status "done"`) {
		t.Errorf("--status done: exit %d, stderr %q", code, errOut)
	}
}

// `appliance logs --follow` of a running job stops when the API key it
// follows with is revoked, saying so and how to sign in again, rather
// than reconnecting.
func TestLogsFollowStopsWhenItsKeyIsRevoked(t *testing.T) {
	wsDir, _ := waitForGoWorkspace(t)
	// No worker: the job waits, its log saying so.
	f := startFixture(t, map[string]string{"waiting": wsDir}, 0, withAuth)
	admin := loginToken(t, f.url, "first-password")
	var key map[string]any
	if code := doAs(t, "POST", f.url+"/api/auth/api-keys", admin, map[string]any{"name": "follow"}, &key); code != 200 {
		t.Fatalf("create key: %d", code)
	}
	var job map[string]any
	if code := doAs(t, "POST", f.url+"/api/workspaces/waiting/tasks/wait-for-go/execute", admin, map[string]any{"input": map[string]any{}}, &job); code != 200 {
		t.Fatalf("execute: %d", code)
	}
	t.Setenv("APPLIANCE_TOKEN", key["key"].(string))

	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- app.Main([]string{"logs", job["job_id"].(string), "--follow", "--server", f.url}, &stdout, &stderr)
	}()
	waitUntil(t, "the first line to be streamed", func() bool { return strings.Contains(stdout.String(), "no worker is active") })
	if code := doAs(t, "DELETE", f.url+"/api/auth/api-keys/"+key["prefix"].(string), admin, nil, nil); code != 200 {
		t.Fatalf("revoke key: %d", code)
	}
	select {
	case code := <-exit:
		if errOut := stderr.String(); code != 1 || !strings.Contains(errOut, "api key was revoked") || !strings.Contains(errOut, "APPLIANCE_TOKEN") {
			t.Fatalf("logs --follow exited %d; stderr %q; want 1, the reason and how to sign in again", code, errOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs --follow went on after its key was revoked")
	}
}
