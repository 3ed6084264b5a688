package docker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

func dockerStep(t *testing.T, d *Runner, a *workflow.Action, input map[string]any, l *lines) *runners.Step {
	return &runners.Step{
		JobID:     uniqueJobID(t, d),
		Name:      "step",
		Workspace: "ws",
		Dir:       t.TempDir(),
		Action:    a,
		Input:     input,
		Log:       l.log,
	}
}

func TestDockerCmdSeesInputAndEnvAndEmitsOutput(t *testing.T) {
	d := needDocker(t)
	l := &lines{}
	step := dockerStep(t, d, &workflow.Action{
		Type:  workflow.TypeDocker,
		Image: testImage,
		Env:   map[string]string{"GREETING": "hello"},
		Cmd: `echo "$GREETING $INPUT_NAME $INPUT_COUNT"
cat "$APPLIANCE_INPUT"; echo
echo "job=$APPLIANCE_JOB_ID step=$APPLIANCE_STEP"
echo to-stderr >&2
echo 'OUTPUT: {"ok": true}'`,
	}, map[string]any{"name": "world", "count": 3}, l)

	res := runners.Execute(testContext(t), d, step)

	if res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("result = exit %d, error %q; want success", res.ExitCode, errText(res))
	}
	if res.Output["ok"] != true {
		t.Errorf("output = %v, want ok: true", res.Output)
	}
	for _, want := range []string{"hello world 3", "job=" + step.JobID + " step=step"} {
		if !l.has(runners.Stdout, want) {
			t.Errorf("stdout lacks %q: %q", want, l.stream(runners.Stdout))
		}
	}
	var input map[string]any
	out := l.stream(runners.Stdout)
	if len(out) < 2 || json.Unmarshal([]byte(out[1]), &input) != nil || input["name"] != "world" {
		t.Errorf("$APPLIANCE_INPUT did not hold the input JSON: stdout %q", out)
	}
	if got := l.stream(runners.Stderr); len(got) != 1 || got[0] != "to-stderr" {
		t.Errorf("stderr = %q, want [to-stderr] (streams demultiplexed)", got)
	}
}

func TestDockerEntrypointCommandAndWorkdir(t *testing.T) {
	d := needDocker(t)
	cases := []struct {
		name   string
		action workflow.Action
		want   string
	}{
		{"command alone replaces the image's command", workflow.Action{Command: []string{"echo", "from", "command"}}, "from command"},
		{"entrypoint with command", workflow.Action{Entrypoint: []string{"echo"}, Command: []string{"a", "b"}}, "a b"},
		{"absolute workdir", workflow.Action{Entrypoint: []string{"pwd"}, Workdir: "/data"}, "/data"},
		{"relative workdir is from the root", workflow.Action{Entrypoint: []string{"pwd"}, Workdir: "tmp"}, "/tmp"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &lines{}
			a := tc.action
			a.Type, a.Image = workflow.TypeDocker, testImage
			res := runners.Execute(testContext(t), d, dockerStep(t, d, &a, nil, l))
			if res.Error != nil {
				t.Fatalf("error %q", errText(res))
			}
			if got := l.stream(runners.Stdout); len(got) != 1 || got[0] != tc.want {
				t.Errorf("stdout = %q, want [%q]", got, tc.want)
			}
		})
	}
}

func TestDockerNonZeroExitFailsWithStderrTail(t *testing.T) {
	d := needDocker(t)
	l := &lines{}
	res := runners.Execute(testContext(t), d, dockerStep(t, d, &workflow.Action{
		Type: workflow.TypeDocker, Image: testImage,
		Cmd: "echo working; echo 'disk full' >&2; exit 3",
	}, nil, l))
	if res.ExitCode != 3 {
		t.Errorf("exit code = %d, want 3", res.ExitCode)
	}
	if got, want := errText(res), "Exit code: 3\ndisk full"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestDockerCancelStopsAndRemovesContainer(t *testing.T) {
	d := needDocker(t)
	l := &lines{}
	// sh as PID 1 ignores SIGTERM, so this also proves the kill after the grace.
	step := dockerStep(t, d, &workflow.Action{
		Type: workflow.TypeDocker, Image: testImage, Cmd: "echo started; sleep 60",
	}, nil, l)
	ctx, cancel := context.WithCancelCause(testContext(t))
	done := make(chan runners.Result, 1)
	go func() { done <- runners.Execute(ctx, d, step) }()

	eventually(t, 20*time.Second, "the container to start", func() bool { return l.has(runners.Stdout, "started") })
	if n := len(containersOf(t, d, step.JobID)); n != 1 {
		t.Fatalf("%d containers labelled with the job while it runs, want 1", n)
	}
	began := time.Now()
	cancel(runners.ErrStepCancelled)
	var res runners.Result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("step still running 10s after cancel")
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("cancel took %s, want within the 1s grace plus overhead", took)
	}
	if errText(res) != runners.ErrStepCancelled.Error() {
		t.Errorf("error = %q, want %q", errText(res), runners.ErrStepCancelled)
	}
	if n := len(containersOf(t, d, step.JobID)); n != 0 {
		t.Errorf("%d containers left after cancel, want 0", n)
	}
}

func TestDockerScriptRunnerReadsWorkspaceReadOnly(t *testing.T) {
	d := needDocker(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub", "data.txt"), "from the workspace\n")
	writeFile(t, filepath.Join(dir, "job.sh"), "echo \"source file in $(pwd)\"\n")

	cases := []struct {
		name   string
		action workflow.Action
		want   []string
	}{
		{
			name: "inline script in workdir",
			action: workflow.Action{Workdir: "sub", Script: `cat data.txt
pwd
touch new 2>/dev/null && echo writable || echo read-only
echo "name=$INPUT_NAME"`},
			want: []string{"from the workspace", "/workspace/sub", "read-only", "name=docker"},
		},
		{
			name:   "source file",
			action: workflow.Action{Source: "job.sh"},
			want:   []string{"source file in /workspace"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &lines{}
			a := tc.action
			a.Type, a.Runner = workflow.TypeScript, "docker"
			step := dockerStep(t, d, &a, map[string]any{"name": "docker"}, l)
			step.Dir = dir
			res := runners.Execute(testContext(t), d, step)
			if res.Error != nil {
				t.Fatalf("error %q (stderr %q)", errText(res), l.stream(runners.Stderr))
			}
			if got := l.stream(runners.Stdout); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("stdout = %q, want %q", got, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "sub", "new")); err == nil {
				t.Error("the script wrote into the workspace")
			}
		})
	}
}

func TestDockerMissingImageFailsClearly(t *testing.T) {
	d := needDocker(t)
	l := &lines{}
	res := runners.Execute(testContext(t), d, dockerStep(t, d, &workflow.Action{
		Type: workflow.TypeDocker, Image: "appliance-test-no-such-image:never", Cmd: "true",
	}, nil, l))
	want := `image "appliance-test-no-such-image:never" is not available on this worker and could not be pulled: `
	if !strings.HasPrefix(errText(res), want) {
		t.Errorf("error = %q, want it to start %q", errText(res), want)
	}
}

func TestDockerMemoryRequestBecomesContainerLimit(t *testing.T) {
	d := needDocker(t)
	l := &lines{}
	res := runners.Execute(testContext(t), d, dockerStep(t, d, &workflow.Action{
		Type: workflow.TypeDocker, Image: testImage,
		Resources: &workflow.Resources{Memory: "64Mi", CPU: "500m"},
		// cgroup v2 names the limit memory.max, v1 memory.limit_in_bytes.
		Cmd: "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
	}, nil, l))
	if res.Error != nil {
		t.Fatalf("error %q", errText(res))
	}
	if got := l.stream(runners.Stdout); len(got) != 1 || got[0] != "67108864" {
		t.Errorf("memory limit in the container = %q, want 67108864", got)
	}
}
