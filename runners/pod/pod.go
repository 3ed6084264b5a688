package pod

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// Kind declares the pod runner, detected with cfg (the worker config's
// kubernetes section; nil = none, and no pod runner).
func Kind(cfg *Config) runners.Kind {
	return runners.Kind{Name: "pod", Tag: "kubernetes", Detect: func(ctx context.Context, env runners.DetectEnv) (runners.Runner, error) {
		return detect(ctx, cfg, env)
	}}
}

// DefaultInitImage runs a script pod's init container (`appliance
// fetch-workspace`): the image the project's Dockerfile builds.
const DefaultInitImage = "appliance:latest"

// Config configures the pod runner. Zero values are defaults.
type Config struct {
	// Kubeconfig is a kubeconfig file; InCluster uses the service account
	// of the pod the worker runs in instead. One of them is required.
	Kubeconfig string
	InCluster  bool
	// Namespace holds the step pods (default: the kubeconfig context's, or
	// the worker pod's own in-cluster, else "default").
	Namespace string
	// InitImage runs the init container that writes the input file and
	// fetches a script's workspace (default DefaultInitImage).
	InitImage string
	// ServiceAccount and ImagePullSecrets are set on every step pod (a
	// manifest may override them).
	ServiceAccount   string
	ImagePullSecrets []string
	// PodStartTimeout bounds how long a pod may stay unscheduled or
	// pending (default 5m).
	PodStartTimeout time.Duration
	// ServerURL is where step pods reach the server to fetch a workspace
	// (a remote worker's server_url by default).
	ServerURL string
	// Images maps a script language to its image, as docker.images.
	Images map[string]string
	// KillGrace is how long a cancelled step's pod has to stop before it
	// is deleted without grace (default 5s).
	KillGrace time.Duration
	// PollInterval is how often a pod's status is read (default 1s).
	PollInterval time.Duration

	// Client and Logs replace the clientset built from the config and
	// its log streams (tests: client-go's fake clientset).
	Client corev1client.CoreV1Interface
	Logs   PodLogs
	Log    *slog.Logger
}

// Runner runs pod actions, and script actions with runner pod, as pods.
type Runner struct {
	cfg    Config
	worker string
	client corev1client.CoreV1Interface
	logs   PodLogs
	log    *slog.Logger
}

// podOpTimeout bounds one API call that must not hang a step.
const podOpTimeout = 30 * time.Second

// New returns the pod runner of worker (whose pods it labels). It does
// not contact the cluster; see Check.
func New(worker string, cfg Config) (*Runner, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.InitImage == "" {
		cfg.InitImage = DefaultInitImage
	}
	if cfg.PodStartTimeout <= 0 {
		cfg.PodStartTimeout = 5 * time.Minute
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 5 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	images, err := runners.LanguageImages(cfg.Images)
	if err != nil {
		return nil, err
	}
	cfg.Images = images
	client := cfg.Client
	if client == nil {
		rc, ns, err := restConfig(cfg)
		if err != nil {
			return nil, err
		}
		if cfg.Namespace == "" {
			cfg.Namespace = ns
		}
		if client, err = corev1client.NewForConfig(rc); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	logs := cfg.Logs
	if logs == nil {
		logs = clientLogs{client}
	}
	return &Runner{cfg: cfg, worker: worker, client: client, logs: logs, log: cfg.Log}, nil
}

// restConfig loads the cluster's address and credentials, and the
// namespace they name.
func restConfig(cfg Config) (*rest.Config, string, error) {
	switch {
	case cfg.InCluster && cfg.Kubeconfig != "":
		return nil, "", errors.New("kubernetes: set kubeconfig or in_cluster, not both")
	case cfg.InCluster:
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubernetes.in_cluster: %w", err)
		}
		ns, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		return rc, strings.TrimSpace(string(ns)), nil
	case cfg.Kubeconfig != "":
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig}, &clientcmd.ConfigOverrides{})
		rc, err := cc.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubernetes.kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, "", fmt.Errorf("kubernetes.kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		return rc, ns, nil
	}
	return nil, "", errors.New("kubernetes: set kubeconfig (a file) or in_cluster: true")
}

// Check reports whether the cluster answers and lets the worker list pods
// in its namespace.
func (p *Runner) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, runners.DetectTimeout)
	defer cancel()
	if _, err := p.client.Pods(p.cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("list pods in namespace %s: %w", p.cfg.Namespace, err)
	}
	return nil
}

// Namespace is where the runner creates pods.
func (p *Runner) Namespace() string { return p.cfg.Namespace }

// detect offers the pod runner when the worker has a kubernetes
// section whose cluster answers; the pods an earlier run of this worker
// left are deleted then.
func detect(ctx context.Context, c *Config, env runners.DetectEnv) (runners.Runner, error) {
	if c == nil {
		return nil, nil
	}
	cfg := *c
	if cfg.Log == nil {
		cfg.Log = env.Log
	}
	p, err := New(env.Worker, cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Check(ctx); err != nil {
		env.Log.Info("no pod runner: the Kubernetes API does not answer", "err", err)
		return nil, nil
	}
	if n, err := p.CollectGarbage(ctx, nil); err != nil {
		env.Log.Warn("pod runner: cannot delete pods left by an earlier run", "err", err)
	} else if n > 0 {
		env.Log.Info("pod runner: deleted pods of steps this worker no longer holds", "pods", n)
	}
	env.Log.Info("pod runner available", "namespace", p.cfg.Namespace)
	return p, nil
}

// CollectGarbage deletes this worker's pods (by the appliance.worker
// label) of steps it does not hold; held nil means it holds none, as at
// start-up. It returns how many pods it deleted.
func (p *Runner) CollectGarbage(ctx context.Context, held func(jobID, step string) bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, podOpTimeout)
	defer cancel()
	list, err := p.client.Pods(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelWorker + "=" + labelValue(p.worker),
	})
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	n := 0
	for _, pod := range list.Items {
		if held != nil && held(pod.Annotations[runners.LabelJobID], pod.Annotations[runners.LabelStep]) {
			continue
		}
		if err := p.client.Pods(p.cfg.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("delete pod %s: %w", pod.Name, err)
		}
		n++
	}
	return n, nil
}

func ptr[T any](v T) *T { return &v }

// podName is a fresh name for a step's pod.
func podName(step string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	base := strings.ToLower(labelValue(step))
	base = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[:40]
	}
	return strings.TrimRight("appliance-"+base, "-") + "-" + hex.EncodeToString(b[:])
}

// Run creates the step's pod, follows its log and waits for it to end;
// the pod is deleted afterwards whatever happened. When ctx ends the pod
// is deleted with the grace period, then without.
func (p *Runner) Run(ctx context.Context, step *runners.Step) (int, error) {
	if step.Log == nil {
		return 0, runners.ErrNoLog
	}
	a := step.Action
	if a == nil {
		return 0, fmt.Errorf("step %q has no action", step.Name)
	}
	pp := podParams{Name: podName(step.Name), Namespace: p.cfg.Namespace, Worker: p.worker, ServerURL: p.cfg.ServerURL, Revision: step.Revision}
	if a.Type == workflow.TypeScript || a.Type == "" {
		if step.WorkspaceToken == nil || p.cfg.ServerURL == "" {
			return 0, errors.New("runner pod: this worker cannot hand a script pod its workspace (no server URL for pods: set kubernetes.server_url)")
		}
		tok, err := step.WorkspaceToken(ctx)
		if err != nil {
			return 0, fmt.Errorf("workspace token for the pod: %w", err)
		}
		pp.Token = tok
	}
	pod, err := p.buildPod(step, pp)
	if err != nil {
		return 0, err
	}
	if pod, err = mergeManifest(pod, a.Manifest); err != nil {
		return 0, err
	}
	// Creation and clean-up run apart from ctx: a create cut short by a
	// cancel could leave a pod that no one deletes.
	opCtx := context.WithoutCancel(ctx)
	createCtx, cancel := context.WithTimeout(opCtx, podOpTimeout)
	created, err := p.client.Pods(pod.Namespace).Create(createCtx, pod, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("create pod %s in namespace %s: %w", pod.Name, pod.Namespace, err)
	}
	sink := step.Log
	if step.Flush != nil {
		// The pod's log stream gives no sign of when a read will wait:
		// each line is written out at once.
		sink = func(stream, line string) { step.Log(stream, line); step.Flush() }
	}
	w := &podWatch{p: p, name: created.Name, ns: created.Namespace, sink: sink}
	defer w.delete(opCtx, 0)
	code, err := w.run(ctx)
	if ctx.Err() != nil {
		w.delete(opCtx, p.cfg.KillGrace)
	}
	return code, err
}
