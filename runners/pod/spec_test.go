package pod

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

var updateGolden = flag.Bool("update", false, "rewrite the pod golden files in testdata/pod")

// testPodRunner is a pod runner over client-go's fake clientset (no
// cluster can run in these tests).
func testPodRunner(t *testing.T) *Runner {
	t.Helper()
	p, err := New("worker-1", Config{
		Client:           newFakeKube(t, nil).cs.CoreV1(),
		Namespace:        "steps",
		InitImage:        "appliance:test",
		ServiceAccount:   "appliance-steps",
		ImagePullSecrets: []string{"regcred"},
		ServerURL:        "http://appliance.internal:8080",
		Images:           map[string]string{"python": "python:3.13-slim"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podStep(a *workflow.Action) *runners.Step {
	return &runners.Step{
		JobID: "job-0001", Name: "build_it", Workspace: "examples", Revision: "rev42",
		Action: a, Input: map[string]any{"name": "Ada", "count": 3},
	}
}

// TestPodSpecGolden compares the generated pod of each action form with a
// golden YAML file (go test ./runners -run TestPodSpecGolden -update).
func TestPodSpecGolden(t *testing.T) {
	cases := []struct {
		name   string
		action *workflow.Action
	}{
		{"pod_cmd", &workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "echo hi $INPUT_NAME",
			Env: map[string]string{"GREETING": "hello"}, Resources: &workflow.Resources{CPU: "500m", Memory: "256Mi"}}},
		{"pod_entrypoint", &workflow.Action{Type: workflow.TypePod, Image: "busybox", Entrypoint: []string{"/bin/echo"},
			Command: []string{"a", "b"}, Workdir: "srv"}},
		{"script_inline", &workflow.Action{Type: workflow.TypeScript, Runner: "pod", Script: "echo hello\n", Language: "shell"}},
		{"script_source", &workflow.Action{Type: workflow.TypeScript, Runner: "pod", Source: "tools/report.py",
			Language: "python", Workdir: "tools"}},
		{"pod_manifest", &workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "true", Manifest: map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{"team": "data"}},
			"spec": map[string]any{
				"nodeSelector": map[string]any{"disktype": "ssd"},
				"containers":   []any{map[string]any{"name": "proxy", "image": "envoyproxy/envoy:v1.31"}},
			},
		}}},
	}
	p := testPodRunner(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := podStep(tc.action)
			pod, err := p.buildPod(step, podParams{Name: "appliance-build-it-0000", Namespace: "steps", Worker: "worker-1",
				ServerURL: "http://appliance.internal:8080", Revision: "rev42", Token: "apst_TOKEN"})
			if err != nil {
				t.Fatal(err)
			}
			if pod, err = mergeManifest(pod, tc.action.Manifest); err != nil {
				t.Fatal(err)
			}
			got, err := yaml.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join("testdata", "pod", tc.name+".yaml")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("pod for %s differs from %s:\n%s", tc.name, file, got)
			}
		})
	}
}

func TestPodManifestMerge(t *testing.T) {
	base := func(t *testing.T) *runners.Step {
		return podStep(&workflow.Action{Type: workflow.TypePod, Image: "alpine:3", Cmd: "true",
			Env: map[string]string{"KEEP": "1"}})
	}
	cases := []struct {
		name     string
		manifest map[string]any
		check    func(t *testing.T, yamlText string)
		err      string
	}{
		{name: "container merged by name", manifest: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "step", "imagePullPolicy": "Always", "env": []any{map[string]any{"name": "EXTRA", "value": "x"}}},
		}}}, check: func(t *testing.T, y string) {
			for _, want := range []string{"imagePullPolicy: Always", "name: EXTRA", "name: KEEP", "image: alpine:3"} {
				if !strings.Contains(y, want) {
					t.Errorf("merged pod lacks %q", want)
				}
			}
			if strings.Count(y, " name: step\n") != 1 {
				t.Errorf("the step container should stay one container:\n%s", y)
			}
		}},
		{name: "tolerations appended", manifest: map[string]any{"spec": map[string]any{"tolerations": []any{
			map[string]any{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
		}}}, check: func(t *testing.T, y string) {
			if !strings.Contains(y, "key: gpu") {
				t.Errorf("toleration missing:\n%s", y)
			}
		}},
		{name: "scalars replaced", manifest: map[string]any{"spec": map[string]any{
			"serviceAccountName": "deployer", "activeDeadlineSeconds": 600,
		}}, check: func(t *testing.T, y string) {
			if !strings.Contains(y, "serviceAccountName: deployer") || strings.Contains(y, "appliance-steps") {
				t.Errorf("service account not replaced:\n%s", y)
			}
			if !strings.Contains(y, "activeDeadlineSeconds: 600") {
				t.Errorf("activeDeadlineSeconds missing:\n%s", y)
			}
		}},
		{name: "sidecar without image", manifest: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "proxy"},
		}}}, err: "spec.containers[proxy].image: required"},
		{name: "restart policy", manifest: map[string]any{"spec": map[string]any{"restartPolicy": "Always"}},
			err: "spec.restartPolicy: must be Never"},
		{name: "unknown field", manifest: map[string]any{"spec": map[string]any{"nodeSelectr": map[string]any{"a": "b"}}},
			err: `unknown field "nodeSelectr"`},
		{name: "mount of no volume", manifest: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "step", "volumeMounts": []any{map[string]any{"name": "cache", "mountPath": "/cache"}}},
		}}}, err: `no volume named "cache"`},
		{name: "namespace", manifest: map[string]any{"metadata": map[string]any{"namespace": "kube-system"}},
			err: "metadata.namespace: set by the runner"},
		{name: "pod name", manifest: map[string]any{"metadata": map[string]any{"name": "fixed"}},
			err: "metadata.name: set by the runner"},
		{name: "runner label", manifest: map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelWorker: "other"}}},
			err: "metadata.labels.appliance.worker: set by the runner"},
		{name: "runner annotation", manifest: map[string]any{"metadata": map[string]any{"annotations": map[string]any{runners.LabelJobID: "job-0002"}}},
			err: "metadata.annotations.appliance.job_id: set by the runner"},
		{name: "init container", manifest: map[string]any{"spec": map[string]any{"initContainers": []any{
			map[string]any{"name": "appliance-init", "image": "evil:1"},
		}}}, err: "spec.initContainers[appliance-init]: the runner's own init container"},
		{name: "own labels and init containers kept", manifest: map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "data"}, "annotations": map[string]any{"note": "x"}},
			"spec":     map[string]any{"initContainers": []any{map[string]any{"name": "warm", "image": "busybox"}}},
		}, check: func(t *testing.T, y string) {
			for _, want := range []string{"team: data", "note: x", "name: warm", "name: appliance-init", "appliance.worker: w"} {
				if !strings.Contains(y, want) {
					t.Errorf("merged pod lacks %q:\n%s", want, y)
				}
			}
		}},
		{name: "bad container name", manifest: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "Side_Car", "image": "x"},
		}}}, err: `spec.containers[Side_Car].name`},
	}
	p := testPodRunner(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := base(t)
			pod, err := p.buildPod(step, podParams{Name: "p", Namespace: "steps", Worker: "w"})
			if err != nil {
				t.Fatal(err)
			}
			merged, err := mergeManifest(pod, tc.manifest)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			y, _ := yaml.Marshal(merged)
			tc.check(t, string(y))
		})
	}
}

func TestPodLabelValuesAreLabelSafe(t *testing.T) {
	long := strings.Repeat("step-", 30)
	for in, want := range map[string]string{
		"build":              "build",
		"my step/with:chars": "my-step-with-chars",
		"-edge-":             "edge",
	} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
	if got := labelValue(long); len(got) > 63 || got == labelValue(long+"x") {
		t.Errorf("labelValue(long) = %q: want at most 63 characters, distinct per input", got)
	}
}
