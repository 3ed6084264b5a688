package config

import (
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/runners/pod"
	"github.com/appliance-sh/appliance/runners/worker"
)

// Kubernetes is the `kubernetes` section of the worker config (and
// of the server config, for the in-process pool): with it the worker
// offers the pod runner and the kubernetes tag, if the cluster answers.
type Kubernetes struct {
	// Kubeconfig is a kubeconfig file; InCluster uses the worker pod's
	// service account instead. One of them.
	Kubeconfig string `yaml:"kubeconfig"`
	InCluster  bool   `yaml:"in_cluster"`
	// Namespace of the step pods (default the kubeconfig context's, or
	// the worker pod's own).
	Namespace string `yaml:"namespace"`
	// InitImage fetches a script pod's workspace (default
	// pod.DefaultInitImage).
	InitImage        string   `yaml:"init_image"`
	ServiceAccount   string   `yaml:"service_account"`
	ImagePullSecrets []string `yaml:"image_pull_secrets"`
	// PodStartTimeout bounds scheduling and image pulls (default 5m).
	PodStartTimeout string `yaml:"pod_start_timeout"`
	// ServerURL is where pods reach the server (default the worker's
	// server_url; the in-process pool has none by default).
	ServerURL string `yaml:"server_url"`
	// KillGrace is how long a cancelled step's pod has to stop (default 5s).
	KillGrace string `yaml:"kill_grace"`
}

// RunnerConfig checks the section and gives the pod runner's settings;
// serverURL is the worker's own.
func (s *Kubernetes) RunnerConfig(serverURL string) (*pod.Config, error) {
	if s == nil {
		return nil, nil
	}
	if s.InCluster == (s.Kubeconfig != "") {
		return nil, fmt.Errorf("kubernetes: set exactly one of kubeconfig (a file) and in_cluster: true")
	}
	c := &pod.Config{
		Kubeconfig:       s.Kubeconfig,
		InCluster:        s.InCluster,
		Namespace:        s.Namespace,
		InitImage:        s.InitImage,
		ServiceAccount:   s.ServiceAccount,
		ImagePullSecrets: s.ImagePullSecrets,
		ServerURL:        s.ServerURL,
	}
	if c.ServerURL == "" {
		c.ServerURL = serverURL
	} else if _, err := worker.ParseServerURL(c.ServerURL); err != nil {
		return nil, fmt.Errorf("kubernetes.server_url: %w", err)
	}
	for _, d := range []struct {
		key, value string
		min        time.Duration
		out        *time.Duration
	}{
		{"pod_start_timeout", s.PodStartTimeout, time.Second, &c.PodStartTimeout},
		{"kill_grace", s.KillGrace, time.Second, &c.KillGrace},
	} {
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		if err != nil || v < d.min {
			return nil, fmt.Errorf("kubernetes.%s: want a duration of at least %s, got %q", d.key, d.min, d.value)
		}
		*d.out = v
	}
	return c, nil
}
