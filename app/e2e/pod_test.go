package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners/pod/kubetest"
)

// No cluster can run here: kubetest serves the part of the Kubernetes API
// detection reads (a pod list) on loopback, reached through a real
// kubeconfig; creating a pod there answers 404, which is how these tests
// see a pod step reach the pod runner.

const podWorkflow = `
actions:
  in-pod:
    type: pod
    image: alpine:3
    cmd: echo hi
tasks:
  pod:
    flow:
      run:
        action: in-pod
`

func TestInProcessPoolGetsTheKubernetesTagWhenTheClusterAnswers(t *testing.T) {
	api := kubetest.Start(t, "steps")
	ws := t.TempDir()
	writeWorkspace(t, ws, podWorkflow)
	f := startFixture(t, map[string]string{"main": ws}, 1, func(c *config.Server) {
		c.Kubernetes = &config.Kubernetes{Kubeconfig: api.Kubeconfig}
	})
	workers := f.workers()
	if len(workers) != 1 || !slices.Contains(workers[0].Tags, "kubernetes") {
		t.Fatalf("workers = %+v, want the in-process pool with the kubernetes tag", workers)
	}
	if !slices.Contains(f.srv.workerTags, "kubernetes") {
		t.Errorf("start-up tags = %v", f.srv.workerTags)
	}
	job := f.execute("main", "pod", nil)
	j := f.waitJob(job, "the pod step to fail", func(j jobView) bool { return j.Status == "failed" })
	if msg := deref(j.step("run").ErrorMessage); !strings.Contains(msg, "create pod") || !strings.Contains(msg, "namespace steps") {
		t.Errorf("step error = %q, want the pod runner's create error", msg)
	}
}

func TestRemoteWorkerGetsTheKubernetesTagAndPrintsIt(t *testing.T) {
	api := kubetest.Start(t, "steps")
	f, _ := remoteFixture(t, podWorkflow)
	job := f.execute("main", "pod", nil)
	p := startWorkerProcess(t, f.url, workerToken, "kube-worker", "tags: [linux]\nkubernetes:\n  kubeconfig: "+api.Kubeconfig+"\n")
	w := f.worker("kube-worker")
	if !slices.Contains(w.Tags, "kubernetes") || !slices.Contains(w.Tags, "linux") {
		t.Fatalf("tags = %v, want linux and kubernetes", w.Tags)
	}
	waitUntil(t, "the worker to print its detected tags", func() bool {
		for _, line := range strings.Split(p.stdout.String(), "\n") {
			if strings.Contains(line, "detected tags:       linux, ") && strings.Contains(line, "kubernetes (runners: local, ") &&
				strings.HasSuffix(line, "pod)") {
				return true
			}
		}
		return false
	})
	j := f.waitJob(job, "the pod step to fail", func(j jobView) bool { return j.Status == "failed" })
	if msg := deref(j.step("run").ErrorMessage); !strings.Contains(msg, "create pod") {
		t.Errorf("step error = %q, want the pod runner's create error", msg)
	}
}

func TestKubernetesSectionIsChecked(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{"kubernetes:\n  namespace: x\n", "set exactly one of kubeconfig"},
		{"kubernetes:\n  kubeconfig: /k\n  in_cluster: true\n", "set exactly one of kubeconfig"},
		{"kubernetes:\n  in_cluster: true\n  pod_start_timeout: soon\n", "kubernetes.pod_start_timeout"},
		{"kubernetes:\n  in_cluster: true\n  kill_grace: 10ms\n", "kubernetes.kill_grace"},
		{"kubernetes:\n  in_cluster: true\n  nodes: 3\n", "nodes"},
	} {
		path := filepath.Join(t.TempDir(), "worker-config.yaml")
		cfg := "server_url: http://127.0.0.1:1\nworker_token: t\n" + tc.section
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := config.LoadWorker(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.section, err, tc.want)
		}
	}
}
