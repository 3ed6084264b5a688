package pod

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// No cluster can run in these tests: they use client-go's fake clientset,
// whose reactors move pods through their phases and feed container
// statuses as a kubelet would, and a fake PodLogs that serves line streams
// (the fake clientset's GetLogs only ever returns "fake logs").

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// fakeKube is a fake cluster: every read of a pod runs lifecycle, which
// may change its status as the kubelet would.
type fakeKube struct {
	cs        *fake.Clientset
	mu        sync.Mutex
	lifecycle func(pod *corev1.Pod)
	// holdGraceful makes deletes with a grace period leave the pod in
	// place (a pod slow to stop), so the runner has to force them.
	holdGraceful bool
	deletes      []int64 // grace periods of the deletes, in order
}

func newFakeKube(t *testing.T, lifecycle func(pod *corev1.Pod), objects ...runtime.Object) *fakeKube {
	t.Helper()
	f := &fakeKube{cs: fake.NewClientset(objects...), lifecycle: lifecycle}
	f.cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		ga := a.(k8stesting.GetAction)
		obj, err := f.cs.Tracker().Get(podsGVR, ga.GetNamespace(), ga.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		f.mu.Lock()
		lc := f.lifecycle
		f.mu.Unlock()
		if lc != nil {
			lc(pod)
			if err := f.cs.Tracker().Update(podsGVR, pod, ga.GetNamespace()); err != nil {
				return true, nil, err
			}
		}
		return true, pod, nil
	})
	f.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		da := a.(k8stesting.DeleteActionImpl)
		var grace int64 = -1
		if g := da.DeleteOptions.GracePeriodSeconds; g != nil {
			grace = *g
		}
		f.mu.Lock()
		f.deletes = append(f.deletes, grace)
		hold := f.holdGraceful && grace > 0
		f.mu.Unlock()
		if hold {
			if _, err := f.cs.Tracker().Get(podsGVR, da.GetNamespace(), da.GetName()); err != nil {
				return true, nil, err
			}
			return true, nil, nil
		}
		return false, nil, nil
	})
	return f
}

func (f *fakeKube) setLifecycle(lc func(pod *corev1.Pod)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lifecycle = lc
}

func (f *fakeKube) deleteGraces() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.deletes...)
}

// pods lists the pods in the namespace.
func (f *fakeKube) pods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	list, err := f.cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// created is the pod the runner created (it is gone once the step ends;
// the create action keeps it).
func (f *fakeKube) created(t *testing.T) *corev1.Pod {
	t.Helper()
	for _, a := range f.cs.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			return ca.GetObject().(*corev1.Pod)
		}
	}
	t.Fatal("no pod was created")
	return nil
}

// Kubelet-like status changes.

func stepRunning(pod *corev1.Pod) {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podStepContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

func stepExited(code int32, msg string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			pod.Status.Phase = corev1.PodFailed
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: podStepContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}}}
	}
}

// fakeLogs serves the step container's log as a list of streams, one per
// open: a stream that ends before the last one is a dropped connection.
type fakeLogs struct {
	mu      sync.Mutex
	streams []string
	opened  int
	since   []*time.Time
	block   bool // after the last stream, block until the context ends
}

func (l *fakeLogs) Stream(ctx context.Context, ns, pod, container string, since *time.Time) (io.ReadCloser, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since = append(l.since, since)
	if l.opened < len(l.streams) {
		s := l.streams[l.opened]
		l.opened++
		return io.NopCloser(strings.NewReader(s)), nil
	}
	if l.block {
		r, w := io.Pipe()
		context.AfterFunc(ctx, func() { w.Close() })
		return r, nil
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// served reports whether every stream has been opened.
func (l *fakeLogs) served() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.opened >= len(l.streams)
}

func (l *fakeLogs) sinces() []*time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*time.Time(nil), l.since...)
}

// newTestPod is a pod runner over f with fast polling.
func newTestPod(t *testing.T, f *fakeKube, logs PodLogs, tweak func(*Config)) *Runner {
	t.Helper()
	cfg := Config{Client: f.cs.CoreV1(), Logs: logs, Namespace: "steps", PollInterval: 5 * time.Millisecond,
		KillGrace: 50 * time.Millisecond, ServerURL: "http://appliance.internal:8080", Log: quietLog()}
	if tweak != nil {
		tweak(&cfg)
	}
	p, err := New("worker-1", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func isGone(f *fakeKube, ns, name string) bool {
	_, err := f.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
