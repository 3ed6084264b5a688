package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// runLocal runs an action with the local runner in a fresh workspace dir.
func runLocal(t *testing.T, ctx context.Context, dir string, a *workflow.Action, input map[string]any) (runners.Result, *lines) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	a.Type = workflow.TypeScript
	out := &lines{}
	l := New(Config{DepsDir: t.TempDir(), KillGrace: 500 * time.Millisecond})
	res := runners.Execute(ctx, l, &runners.Step{JobID: "job-1", Name: "step-a", Workspace: "ws", Dir: dir, Action: a, Input: input, Log: out.log})
	return res, out
}

func TestShellStepCapturesLastValidOutputLine(t *testing.T) {
	res, out := runLocal(t, testContext(t), "", &workflow.Action{Script: `
echo hello
echo 'OUTPUT: {"n": 1}'
echo 'OUTPUT: {"n": 2, "s": "two"}'
echo 'OUTPUT: {not json'
echo 'OUTPUT: [1, 2]'
echo 'OUTPUT: null'
echo 'OUTPUT: {"n": 3}' >&2
echo warning >&2
`}, nil)
	if res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("want success, got exit %d error %q", res.ExitCode, errText(res))
	}
	want := map[string]any{"n": 2.0, "s": "two"}
	if !reflect.DeepEqual(res.Output, want) {
		t.Fatalf("output = %v, want %v (last valid stdout OUTPUT line)", res.Output, want)
	}
	if !out.has(runners.Stdout, "hello") || !out.has(runners.Stderr, "warning") || !out.has(runners.Stdout, "OUTPUT: {not json") {
		t.Fatalf("log lines missing or on the wrong stream: %+v", out.All())
	}
}

func TestStepWithoutOutputLineHasNilOutput(t *testing.T) {
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Script: "echo plain"}, nil)
	if res.Error != nil || res.Output != nil {
		t.Fatalf("want nil output and error, got %v / %q", res.Output, errText(res))
	}
}

func TestInputReachesScriptAsEnvAndJSONFile(t *testing.T) {
	input := map[string]any{
		"name":   "World",
		"count":  3,
		"my-key": "dashed",
		"obj":    map[string]any{"a": []any{1, "x"}},
		"flag":   true,
	}
	res, out := runLocal(t, testContext(t), "", &workflow.Action{Script: `
echo "name=$INPUT_NAME"
echo "count=$INPUT_COUNT"
echo "my_key=$INPUT_MY_KEY"
echo "obj=$INPUT_OBJ"
echo "flag=$INPUT_FLAG"
echo "job=$APPLIANCE_JOB_ID step=$APPLIANCE_STEP ws=$APPLIANCE_WORKSPACE"
echo "file=$(cat "$APPLIANCE_INPUT")"
`}, input)
	if res.Error != nil {
		t.Fatalf("step failed: %s", errText(res))
	}
	for _, want := range []string{
		"name=World", "count=3", "my_key=dashed", `obj={"a":[1,"x"]}`, "flag=true",
		"job=job-1 step=step-a ws=ws",
	} {
		if !out.has(runners.Stdout, want) {
			t.Errorf("missing line %q in %v", want, out.stream(runners.Stdout))
		}
	}
	var file map[string]any
	for _, l := range out.stream(runners.Stdout) {
		if rest, ok := strings.CutPrefix(l, "file="); ok {
			if err := json.Unmarshal([]byte(rest), &file); err != nil {
				t.Fatalf("$APPLIANCE_INPUT is not JSON: %q", rest)
			}
		}
	}
	if file["name"] != "World" || file["count"] != 3.0 || file["my-key"] != "dashed" {
		t.Fatalf("$APPLIANCE_INPUT holds %v", file)
	}
}

// An input over Linux's 128 KiB limit on one environment variable makes
// exec fail with E2BIG; the step's error names the input and the limit
// instead of a bare "argument list too long".
func TestOversizedInputNamesInputAndLimit(t *testing.T) {
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Script: `echo "$INPUT_SMALL"`},
		map[string]any{"big_blob": strings.Repeat("x", 200<<10), "small": "ok"})
	msg := errText(res)
	for _, want := range []string{`input "big_blob" (INPUT_BIG_BLOB, 200 KiB)`, "over 128 KiB", "argument list too long"} {
		if !strings.Contains(msg, want) {
			t.Errorf("step error %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "small") {
		t.Errorf("step error %q names an input within the limit", msg)
	}
}

func TestEnvMapIsExportedAsIs(t *testing.T) {
	res, out := runLocal(t, testContext(t), "", &workflow.Action{
		Script: `echo "greeting=$GREETING"; echo "spaced=$SPACED"`,
		Env:    map[string]string{"GREETING": "hi {{ not rendered here }}", "SPACED": "a  b"},
	}, nil)
	if res.Error != nil {
		t.Fatalf("step failed: %s", errText(res))
	}
	if !out.has(runners.Stdout, "greeting=hi {{ not rendered here }}") || !out.has(runners.Stdout, "spaced=a  b") {
		t.Fatalf("env not exported as-is: %v", out.stream(runners.Stdout))
	}
}

func TestScriptRunsInWorkspaceDirOrItsWorkdir(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "sub", "deeper"), 0o755)
	os.WriteFile(filepath.Join(ws, "data.txt"), []byte("root file\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "sub", "deeper", "data.txt"), []byte("deep file\n"), 0o644)

	for _, tc := range []struct{ workdir, want string }{
		{"", "root file"},
		{"sub/deeper", "deep file"},
		{"./sub/../sub/deeper/", "deep file"},
	} {
		res, out := runLocal(t, testContext(t), ws, &workflow.Action{Script: "cat data.txt", Workdir: tc.workdir}, nil)
		if res.Error != nil || !out.has(runners.Stdout, tc.want) {
			t.Errorf("workdir %q: error %q, stdout %v; want %q", tc.workdir, errText(res), out.stream(runners.Stdout), tc.want)
		}
	}
}

func TestBadWorkdirOrSourceIsAClearError(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct {
		name string
		a    workflow.Action
		want string
	}{
		{"workdir climbing out", workflow.Action{Script: "true", Workdir: "../x"}, `workdir "../x": leaves the workspace`},
		{"absolute workdir", workflow.Action{Script: "true", Workdir: "/tmp"}, `workdir "/tmp": must be relative to the workspace`},
		{"missing workdir", workflow.Action{Script: "true", Workdir: "nope"}, `workdir "nope": no such directory in the workspace`},
		{"source climbing out", workflow.Action{Source: "../../etc/passwd"}, `source "../../etc/passwd": leaves the workspace`},
		{"missing source", workflow.Action{Source: "scripts/none.sh"}, `source "scripts/none.sh": not found in the workspace`},
		{"both script and source", workflow.Action{Script: "true", Source: "x.sh"}, "exactly one of script and source"},
		{"unknown language", workflow.Action{Script: "x", Language: "cobol"}, `unsupported language "cobol"`},
		{"shell dependencies", workflow.Action{Script: "true", Dependencies: []string{"jq"}}, "dependencies need a non-shell language"},
		{"go dependencies", workflow.Action{Script: "package main", Language: "go", Dependencies: []string{"x"}}, "go: dependencies are not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.a
			res, _ := runLocal(t, testContext(t), ws, &a, nil)
			if res.ExitCode == 0 || !strings.Contains(errText(res), tc.want) {
				t.Fatalf("exit %d error %q, want it to contain %q", res.ExitCode, errText(res), tc.want)
			}
		})
	}
}

func TestSourceFileRunsFromWorkspace(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "scripts"), 0o755)
	os.WriteFile(filepath.Join(ws, "scripts", "hello.py"),
		[]byte("import os, json\nprint('OUTPUT: ' + json.dumps({'cwd': os.getcwd(), 'who': os.environ['INPUT_WHO']}))\n"), 0o644)
	res, _ := runLocal(t, testContext(t), ws, &workflow.Action{Source: "scripts/hello.py", Language: "python"},
		map[string]any{"who": "src"})
	if res.Error != nil {
		t.Fatalf("step failed: %s", errText(res))
	}
	realWS, _ := filepath.EvalSymlinks(ws)
	if res.Output["who"] != "src" || (res.Output["cwd"] != ws && res.Output["cwd"] != realWS) {
		t.Fatalf("output %v, want who=src and cwd=%s", res.Output, ws)
	}
}

func TestPythonFailureReportsExceptionFromStderrTail(t *testing.T) {
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Language: "python", Script: `
import sys
print("about to fail")
def f():
    raise ValueError("boom")
f()
`}, nil)
	if res.ExitCode != 1 {
		t.Fatalf("exit code %d, want 1", res.ExitCode)
	}
	msg := errText(res)
	if !strings.HasPrefix(msg, "Exit code: 1\n") || !strings.Contains(msg, "ValueError: boom") || !strings.Contains(msg, "Traceback") {
		t.Fatalf("error %q, want Exit code: 1 and the traceback", msg)
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		script   string
		code     int
		errorIs  string // "" = no error
		notInErr string
	}{
		{"exit 0", 0, "", ""},
		{"echo bad >&2; exit 3", 3, "Exit code: 3\nbad", ""},
		{"exit 42", 42, "Exit code: 42", ""},
		// Only the last 20 stderr lines are quoted.
		{"for i in $(seq 1 30); do echo line$i >&2; done; exit 2", 2, "Exit code: 2\nline11\n", "line10\n"},
		{"kill -9 $$", 137, "Exit code: 137", ""},
	} {
		res, _ := runLocal(t, testContext(t), "", &workflow.Action{Script: tc.script}, nil)
		if res.ExitCode != tc.code {
			t.Errorf("%q: exit code %d, want %d", tc.script, res.ExitCode, tc.code)
		}
		switch {
		case tc.errorIs == "" && res.Error != nil:
			t.Errorf("%q: error %q, want none", tc.script, *res.Error)
		case tc.errorIs != "" && !strings.HasPrefix(errText(res), tc.errorIs):
			t.Errorf("%q: error %q, want prefix %q", tc.script, errText(res), tc.errorIs)
		case tc.notInErr != "" && strings.Contains(errText(res), tc.notInErr):
			t.Errorf("%q: error %q should not contain %q", tc.script, errText(res), tc.notInErr)
		}
	}
}

func TestStderrTailIsCappedInBytes(t *testing.T) {
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Language: "python",
		Script: "import sys\nfor i in range(20): print(str(i) * 1000, file=sys.stderr)\nsys.exit(5)"}, nil)
	if n := len(errText(res)); n > runners.TailBytes+len("Exit code: 5\n") || n < 1000 {
		t.Fatalf("error is %d bytes long, want at most about %d", n, runners.TailBytes)
	}
}

func TestTimeoutKillsStepAndSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeoutCause(testContext(t), 300*time.Millisecond, runners.TimeoutError(0.3))
	defer cancel()
	began := time.Now()
	res, _ := runLocal(t, ctx, "", &workflow.Action{Script: "sleep 30"}, nil)
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("timed-out step took %s to stop", took)
	}
	if errText(res) != "Step timed out after 0.3s" || res.ExitCode == 0 {
		t.Fatalf("exit %d error %q, want a non-zero exit and the timeout message", res.ExitCode, errText(res))
	}
}

// groupGone reports whether no process of the group remains.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

func TestCancelKillsTheWholeProcessGroup(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"background children", `sleep 300 & sleep 300 & echo "pgid $$"; wait`},
		// A child ignoring SIGTERM is killed with SIGKILL after the grace period.
		{"child ignoring SIGTERM", `trap '' TERM; (trap '' TERM; sleep 300) & echo "pgid $$"; wait; wait`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(testContext(t))
			out := &lines{}
			l := New(Config{KillGrace: 300 * time.Millisecond})
			done := make(chan runners.Result, 1)
			go func() {
				done <- runners.Execute(ctx, l, &runners.Step{Name: "s", Dir: t.TempDir(),
					Action: &workflow.Action{Type: "script", Script: tc.script}, Log: out.log})
			}()
			var pgid int
			eventually(t, 10*time.Second, "the script to start", func() bool {
				for _, l := range out.stream(runners.Stdout) {
					if rest, ok := strings.CutPrefix(l, "pgid "); ok {
						pgid, _ = strconv.Atoi(rest)
						return true
					}
				}
				return false
			})
			if groupGone(pgid) {
				t.Fatalf("process group %d not running before cancel", pgid)
			}
			cancel(runners.ErrStepCancelled)
			res := <-done
			if errText(res) != runners.ErrStepCancelled.Error() {
				t.Fatalf("error %q, want %q", errText(res), runners.ErrStepCancelled)
			}
			// Orphans are reaped by init, which may take a moment.
			eventually(t, 15*time.Second, "every process of the group to be gone", func() bool { return groupGone(pgid) })
		})
	}
}

func TestFinishedStepLeavesNoBackgroundProcess(t *testing.T) {
	res, out := runLocal(t, testContext(t), "", &workflow.Action{Script: `sleep 300 & echo "pgid $$"`}, nil)
	if res.Error != nil {
		t.Fatalf("step failed: %s", errText(res))
	}
	pgid, _ := strconv.Atoi(strings.TrimPrefix(out.stream(runners.Stdout)[0], "pgid "))
	eventually(t, 15*time.Second, "the background sleep to be gone", func() bool { return groupGone(pgid) })
}

func TestMissingInterpreterIsAClearError(t *testing.T) {
	notFound := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, tc := range []struct {
		a    workflow.Action
		want string
	}{
		{workflow.Action{Language: "python", Script: "print(1)"}, "python: no interpreter found (tried uv, python3, python)"},
		{workflow.Action{Language: "ts", Script: "1"}, "typescript: no interpreter found (tried bun, deno, tsc with node)"},
		{workflow.Action{Language: "js", Script: "1"}, "javascript: no interpreter found (tried bun, node)"},
		{workflow.Action{Script: "true"}, "shell: no interpreter found (tried bash, sh, busybox)"},
		{workflow.Action{Language: "python", Script: "1", Interpreter: "pypy9"}, `python: interpreter "pypy9" not found`},
	} {
		a := tc.a
		a.Type = workflow.TypeScript
		l := New(Config{LookPath: notFound})
		res := runners.Execute(testContext(t), l, &runners.Step{Name: "s", Dir: t.TempDir(), Action: &a, Log: (&lines{}).log})
		if errText(res) != tc.want || res.ExitCode == 0 {
			t.Errorf("exit %d error %q, want %q", res.ExitCode, errText(res), tc.want)
		}
	}
}

func TestInterpreterOverrideIsUsed(t *testing.T) {
	// A shell-language step whose interpreter is python3 runs as Python.
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Interpreter: "python3",
		Script: "import json\nprint('OUTPUT: ' + json.dumps({'py': True}))"}, nil)
	if res.Error != nil || res.Output["py"] != true {
		t.Fatalf("interpreter override not used: output %v error %q", res.Output, errText(res))
	}
}

func TestLongLinesAreSplitNotDropped(t *testing.T) {
	res, out := runLocal(t, testContext(t), "", &workflow.Action{Language: "python",
		Script: "print('x' * 200000)\nprint('tail')"}, nil)
	if res.Error != nil {
		t.Fatalf("step failed: %s", errText(res))
	}
	got := out.stream(runners.Stdout)
	total := 0
	for _, l := range got[:len(got)-1] {
		if len(l) > runners.MaxLine {
			t.Fatalf("a logged line is %d bytes, over the %d limit", len(l), runners.MaxLine)
		}
		total += len(l)
	}
	if total != 200000 || got[len(got)-1] != "tail" || len(got) != 5 {
		t.Fatalf("got %d lines carrying %d bytes, want 4 parts of 200000 bytes then tail", len(got), total)
	}
}

func TestJavaScriptRunsWithNode(t *testing.T) {
	requireNode(t)
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Language: "javascript",
		Script: `console.log("OUTPUT: " + JSON.stringify({sum: 1 + Number(process.env.INPUT_N)}))`}, map[string]any{"n": 41})
	if res.Error != nil || res.Output["sum"] != 42.0 {
		t.Fatalf("output %v error %q", res.Output, errText(res))
	}
}

func TestGoScriptRunsWithGoRun(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not installed")
	}
	res, _ := runLocal(t, testContext(t), "", &workflow.Action{Language: "go", Script: `package main

import ("fmt"; "os")

func main() { fmt.Printf("OUTPUT: {\"step\": %q}\n", os.Getenv("APPLIANCE_STEP")) }
`}, nil)
	if res.Error != nil || res.Output["step"] != "step-a" {
		t.Fatalf("output %v error %q", res.Output, errText(res))
	}
}

func TestTimeoutMessageNamesTheSeconds(t *testing.T) {
	for secs, want := range map[float64]string{
		30: "Step timed out after 30s", 0.3: "Step timed out after 0.3s", 100: "Step timed out after 100s", 1.25: "Step timed out after 1.25s",
	} {
		if got := runners.TimeoutError(secs).Error(); got != want {
			t.Errorf("runners.TimeoutError(%v) = %q, want %q", secs, got, want)
		}
	}
}

func TestNullInputIsLeftUnset(t *testing.T) {
	env, err := runners.InputEnv(map[string]any{"given": "x", "missing": nil, "zero": 0})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"INPUT_GIVEN=x", "INPUT_ZERO=0"}; !slices.Equal(env, want) {
		t.Fatalf("runners.InputEnv = %q, want %q", env, want)
	}
}
