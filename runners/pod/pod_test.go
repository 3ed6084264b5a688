package pod

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/pod/kubetest"
)

// Pod runner behaviour over client-go's fake clientset: see pod_fake_test.go.

type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) log(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, stream+": "+line)
}

func (l *lineLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func podActionStep(log *lineLog) *runners.Step {
	s := podStep(&workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "echo hi"})
	s.Log = log.log
	return s
}

// runsUntilLogsServed is a pod that runs until its log streams have all
// been read, then exits with the code and termination message given.
func runsUntilLogsServed(logs *fakeLogs, code int32, msg string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		if logs.served() {
			stepExited(code, msg)(pod)
			return
		}
		stepRunning(pod)
	}
}

func TestPodRunFollowsLogsAndTakesOutput(t *testing.T) {
	logs := &fakeLogs{streams: []string{
		"2026-01-02T03:04:05.000000001Z hello\n2026-01-02T03:04:05.000000002Z OUTPUT: {\"n\": 7}\n",
	}}
	f := newFakeKube(t, nil)
	f.setLifecycle(runsUntilLogsServed(logs, 0, ""))
	var out lineLog
	res := runners.Execute(context.Background(), newTestPod(t, f, logs, nil), podActionStep(&out))
	if res.Error != nil || res.ExitCode != 0 {
		t.Fatalf("result = %d %v, want success", res.ExitCode, *res.Error)
	}
	if res.Output["n"] != float64(7) {
		t.Errorf("output = %v, want n: 7", res.Output)
	}
	if got := out.all(); !slices.Equal(got, []string{"stdout: hello", `stdout: OUTPUT: {"n": 7}`}) {
		t.Errorf("lines = %q", got)
	}
	pod := f.created(t)
	if !isGone(f, "steps", pod.Name) {
		t.Errorf("pod %s still exists after the step ended", pod.Name)
	}
	if pod.Labels[runners.LabelJobID] != "job-0001" || pod.Labels[runners.LabelStep] != "build_it" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod labels %v, restartPolicy %s", pod.Labels, pod.Spec.RestartPolicy)
	}
}

func TestPodLogReconnectsFromSinceTimeWhenTheStreamDrops(t *testing.T) {
	logs := &fakeLogs{streams: []string{
		// the first stream drops after two lines while the container runs
		"2026-01-02T03:04:05.1Z one\n2026-01-02T03:04:06.2Z two\n",
		// the server resends from the whole second: "two" again, then new lines
		"2026-01-02T03:04:06.2Z two\n2026-01-02T03:04:07.3Z three\n2026-01-02T03:04:07.3Z three again\n",
	}}
	f := newFakeKube(t, nil)
	f.setLifecycle(runsUntilLogsServed(logs, 0, ""))
	var out lineLog
	res := runners.Execute(context.Background(), newTestPod(t, f, logs, nil), podActionStep(&out))
	if res.Error != nil {
		t.Fatalf("step failed: %s", *res.Error)
	}
	want := []string{"stdout: one", "stdout: two", "stdout: three", "stdout: three again"}
	if got := out.all(); !slices.Equal(got, want) {
		t.Errorf("lines = %q, want %q (no line lost or repeated)", got, want)
	}
	s := logs.sinces()
	if len(s) < 2 || s[0] != nil || s[1] == nil || !s[1].Equal(time.Date(2026, 1, 2, 3, 4, 6, 200000000, time.UTC)) {
		t.Errorf("SinceTime of the opens = %v, want nil then the last line's time", s)
	}
}

func TestPodExitCodeAndTerminationMessageComeFromTheContainerStatus(t *testing.T) {
	logs := &fakeLogs{streams: []string{"2026-01-02T03:04:05Z working\n"}}
	f := newFakeKube(t, nil)
	f.setLifecycle(runsUntilLogsServed(logs, 3, "disk full"))
	var out lineLog
	res := runners.Execute(context.Background(), newTestPod(t, f, logs, nil), podActionStep(&out))
	if res.ExitCode != 3 || res.Error == nil || !strings.Contains(*res.Error, "Exit code: 3") ||
		!strings.Contains(*res.Error, "termination message: disk full") {
		t.Fatalf("result = %d %v, want exit 3 with the termination message", res.ExitCode, res.Error)
	}
}

func TestPodFailuresAPersonCanActOn(t *testing.T) {
	cases := []struct {
		name      string
		lifecycle func(*corev1.Pod)
		want      []string
	}{
		{"image pull backoff", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodPending
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podStepContainer, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "alpine:3"`}}}}
		}, []string{"ImagePullBackOff", `image "alpine:3"`, "image_pull_secrets"}},
		{"err image pull of the init image", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodPending
			pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podInitContainer, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}}}}
		}, []string{"ErrImagePull", "appliance-init", "appliance:latest"}},
		{"unschedulable", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodPending
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu."}}
		}, []string{"could not be scheduled", "pod_start_timeout", "3 Insufficient cpu", "node selector"}},
		{"evicted", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodFailed
			pod.Status.Reason = "Evicted"
			pod.Status.Message = "The node was low on resource: memory."
		}, []string{"evicted", "low on resource: memory"}},
		{"init container failed", func(pod *corev1.Pod) {
			pod.Status.Phase = corev1.PodFailed
			pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: podInitContainer, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
		}, []string{"init container appliance-init", "exit code 1", "workspace or input"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeKube(t, tc.lifecycle)
			p := newTestPod(t, f, &fakeLogs{}, func(c *Config) { c.PodStartTimeout = 50 * time.Millisecond })
			var out lineLog
			res := runners.Execute(context.Background(), p, podActionStep(&out))
			if res.Error == nil {
				t.Fatal("the step succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(*res.Error, w) {
					t.Errorf("error %q lacks %q", *res.Error, w)
				}
			}
			if pod := f.created(t); !isGone(f, "steps", pod.Name) {
				t.Errorf("pod %s left behind", pod.Name)
			}
		})
	}
}

// TestPodCancelDeletesThePodWithGraceThenForce: a pod that does not go
// away within the grace period is deleted without one.
func TestPodCancelDeletesThePodWithGraceThenForce(t *testing.T) {
	f := newFakeKube(t, stepRunning)
	f.holdGraceful = true
	p := newTestPod(t, f, &fakeLogs{block: true}, nil)
	ctx, kill := context.WithCancelCause(context.Background())
	var out lineLog
	done := make(chan runners.Result, 1)
	go func() { done <- runners.Execute(ctx, p, podActionStep(&out)) }()
	eventually(t, 5*time.Second, "the pod runs", func() bool {
		pods := f.pods(t, "steps")
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning
	})
	kill(runners.ErrStepCancelled)
	res := <-done
	if res.Error == nil || *res.Error != runners.ErrStepCancelled.Error() || res.ExitCode != runners.ExitKilled {
		t.Fatalf("result = %d %v, want the cancellation", res.ExitCode, res.Error)
	}
	if pods := f.pods(t, "steps"); len(pods) != 0 {
		t.Errorf("pods left: %d", len(pods))
	}
	if g := f.deleteGraces(); len(g) < 2 || g[0] != 1 || g[1] != 0 {
		t.Errorf("delete grace periods = %v, want the grace (1s) then 0", g)
	}
}

func TestPodTimeoutDeletesThePod(t *testing.T) {
	f := newFakeKube(t, stepRunning)
	p := newTestPod(t, f, &fakeLogs{block: true}, nil)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 100*time.Millisecond, runners.TimeoutError(0.1))
	defer cancel()
	var out lineLog
	res := runners.Execute(ctx, p, podActionStep(&out))
	if res.Error == nil || !strings.Contains(*res.Error, "Step timed out after 0.1s") {
		t.Fatalf("result = %v, want the timeout", res.Error)
	}
	if pods := f.pods(t, "steps"); len(pods) != 0 {
		t.Errorf("pods left after the timeout: %d", len(pods))
	}
}

func TestPodInvalidManifestFailsBeforeCreation(t *testing.T) {
	f := newFakeKube(t, stepRunning)
	step := podStep(&workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "true",
		Manifest: map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "sidecar"}}}}})
	var out lineLog
	step.Log = out.log
	res := runners.Execute(context.Background(), newTestPod(t, f, &fakeLogs{}, nil), step)
	if res.Error == nil || !strings.Contains(*res.Error, "invalid pod after merging the manifest: spec.containers[sidecar].image: required") {
		t.Fatalf("result = %v", res.Error)
	}
	for _, a := range f.cs.Actions() {
		if a.GetVerb() == "create" {
			t.Error("a pod was created from an invalid manifest")
		}
	}
}

func TestPodScriptGetsAStepBoundTokenNotTheWorkerToken(t *testing.T) {
	logs := &fakeLogs{streams: []string{"2026-01-02T03:04:05Z ok\n"}}
	f := newFakeKube(t, nil)
	f.setLifecycle(runsUntilLogsServed(logs, 0, ""))
	step := podStep(&workflow.Action{Type: workflow.TypeScript, Runner: "pod", Script: "echo ok"})
	var out lineLog
	step.Log = out.log
	minted := 0
	step.WorkspaceToken = func(context.Context) (string, error) { minted++; return "apst_bound", nil }
	if res := runners.Execute(context.Background(), newTestPod(t, f, logs, nil), step); res.Error != nil {
		t.Fatal(*res.Error)
	}
	init := f.created(t).Spec.InitContainers[0]
	env := map[string]string{}
	for _, e := range init.Env {
		env[e.Name] = e.Value
	}
	if minted != 1 || env["APPLIANCE_WORKSPACE_TOKEN"] != "apst_bound" || env["APPLIANCE_REVISION"] != "rev42" {
		t.Errorf("minted %d, init env %v", minted, env)
	}

	// Without a way to mint one the step fails before any pod exists.
	step.WorkspaceToken = func(context.Context) (string, error) { return "", errors.New("step is not running") }
	f2 := newFakeKube(t, stepRunning)
	res := runners.Execute(context.Background(), newTestPod(t, f2, &fakeLogs{}, nil), step)
	if res.Error == nil || !strings.Contains(*res.Error, "workspace token for the pod: step is not running") {
		t.Fatalf("result = %v", res.Error)
	}
}

func TestPodGarbageCollectionAtStartUpDeletesThisWorkersPods(t *testing.T) {
	leftover := func(name, worker string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "steps",
			Labels: map[string]string{LabelWorker: worker}, Annotations: map[string]string{runners.LabelJobID: "j", runners.LabelStep: name}}}
	}
	f := newFakeKube(t, nil, leftover("old-1", "worker-1"), leftover("old-2", "worker-1"), leftover("theirs", "worker-2"))
	found, tags, err := runners.NewRegistry(Kind(&Config{Client: f.cs.CoreV1(), Namespace: "steps"})).Detect(context.Background(), runners.DetectEnv{Worker: "worker-1", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := found["pod"].(*Runner); !ok || !slices.Contains(tags, "kubernetes") {
		t.Fatalf("runners %v tags %v, want the pod runner and the kubernetes tag", found, tags)
	}
	var names []string
	for _, p := range f.pods(t, "steps") {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"theirs"}) {
		t.Errorf("pods after start-up = %v, want only the other worker's", names)
	}

	// While running, pods of steps the worker holds are kept.
	p := found["pod"].(*Runner)
	for _, pod := range []*corev1.Pod{leftover("held", "worker-1"), leftover("stale", "worker-1")} {
		if _, err := f.cs.CoreV1().Pods("steps").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := p.CollectGarbage(context.Background(), func(job, step string) bool { return step == "held" })
	if err != nil || n != 1 {
		t.Fatalf("collected %d, %v; want 1", n, err)
	}
	if isGone(f, "steps", "held") || !isGone(f, "steps", "stale") {
		t.Error("want held kept and stale deleted")
	}
}

func TestPodRunnerIsNotOfferedWhenTheClusterDoesNotAnswer(t *testing.T) {
	f := newFakeKube(t, nil)
	f.cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	found, tags, err := runners.NewRegistry(Kind(&Config{Client: f.cs.CoreV1()})).Detect(context.Background(), runners.DetectEnv{Worker: "w", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if found["pod"] != nil || slices.Contains(tags, "kubernetes") {
		t.Errorf("runners %v tags %v: want no pod runner", found, tags)
	}
	found, tags, _ = runners.NewRegistry(Kind(nil)).Detect(context.Background(), runners.DetectEnv{Worker: "w", Log: quietLog()})
	if found["pod"] != nil || len(tags) != 0 {
		t.Errorf("without a kubernetes section: runners %v tags %v", found, tags)
	}
}

// TestPodRunnerDetectedThroughAKubeconfig: a kubeconfig whose cluster
// answers offers the pod runner in the context's namespace; a namespace
// the API refuses does not, and a missing file is a configuration error.
func TestPodRunnerDetectedThroughAKubeconfig(t *testing.T) {
	api := kubetest.Start(t, "team-a")
	env := runners.DetectEnv{Worker: "w", Log: quietLog()}
	detect := func(cfg *Config) (map[string]runners.Runner, []string, error) {
		return runners.NewRegistry(Kind(cfg)).Detect(context.Background(), env)
	}
	found, tags, err := detect(&Config{Kubeconfig: api.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := found["pod"].(*Runner)
	if !ok || !slices.Equal(tags, []string{"kubernetes"}) || p.Namespace() != "team-a" || api.Lists.Load() == 0 {
		t.Fatalf("runners %v tags %v lists %d: want the pod runner in team-a", found, tags, api.Lists.Load())
	}

	if found, tags, err := detect(&Config{Kubeconfig: api.Kubeconfig, Namespace: "elsewhere"}); err != nil || found["pod"] != nil || len(tags) != 0 {
		t.Errorf("namespace the API refuses: runners %v tags %v err %v; want none", found, tags, err)
	}

	if _, _, err := detect(&Config{Kubeconfig: filepath.Join(t.TempDir(), "missing")}); err == nil || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
		t.Errorf("missing kubeconfig: err = %v", err)
	}
}

func TestPodStepEndsWithItsContainerWhileASidecarRuns(t *testing.T) {
	logs := &fakeLogs{streams: []string{"2026-01-02T03:04:05Z done\n"}}
	f := newFakeKube(t, nil)
	f.setLifecycle(func(pod *corev1.Pod) {
		runsUntilLogsServed(logs, 0, "")(pod)
		pod.Status.Phase = corev1.PodRunning // the sidecar keeps the pod running
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: "clock",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	})
	step := podStep(&workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "echo done",
		Manifest: map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "clock", "image": "busybox"}}}}})
	var out lineLog
	step.Log = out.log
	res := runners.Execute(context.Background(), newTestPod(t, f, logs, nil), step)
	if res.Error != nil || !slices.Equal(out.all(), []string{"stdout: done"}) {
		t.Fatalf("result %v, lines %q", res.Error, out.all())
	}
	if pod := f.created(t); len(pod.Spec.Containers) != 2 || !isGone(f, "steps", pod.Name) {
		t.Errorf("containers %d; the pod must be deleted, sidecar and all", len(pod.Spec.Containers))
	}
}
