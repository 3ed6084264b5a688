package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/appliance-sh/appliance/runners/worker"
)

// workerFile is worker-config.yaml as written.
type workerFile struct {
	ServerURL         string   `yaml:"server_url"`
	ServerURLs        []string `yaml:"server_urls"`
	WorkerToken       string   `yaml:"worker_token"`
	WorkerName        string   `yaml:"worker_name"`
	Tags              []string `yaml:"tags"`
	MaxConcurrent     *int     `yaml:"max_concurrent"`
	WorkspaceCacheDir string   `yaml:"workspace_cache_dir"`
	HeartbeatInterval string   `yaml:"heartbeat_interval"`
	LogPushInterval   string   `yaml:"log_push_interval"`
	DrainTimeout      string   `yaml:"drain_timeout"`
	RetryMinInterval  string   `yaml:"retry_min_interval"`
	RetryMaxInterval  string   `yaml:"retry_max_interval"`
	SpoolDir          string   `yaml:"spool_dir"`
	SpoolMax          string   `yaml:"spool_max"`
	Docker            Docker   `yaml:"docker"`
	// Kubernetes, when present, offers the pod runner.
	Kubernetes *Kubernetes `yaml:"kubernetes"`
	// WorkspaceLimits bound what a downloaded workspace may unpack to.
	WorkspaceLimits WorkspaceLimitsSection `yaml:"workspace_limits"`
}

// WorkspaceLimitsSection is worker-config.yaml's workspace_limits: as
// written; each key defaults to worker.DefaultWorkspaceLimits.
type WorkspaceLimitsSection struct {
	TotalSize string `yaml:"total_size"`
	Files     *int64 `yaml:"files"`
	FileSize  string `yaml:"file_size"`
	Ratio     *int64 `yaml:"ratio"`
}

// Worker is a remote worker's effective configuration, defaults applied.
type Worker struct {
	ServerURL string
	// ServerURLs are the other replicas' addresses of the same service,
	// tried in turn after ServerURL (server_urls; its first entry is
	// ServerURL when server_url is not set).
	ServerURLs        []string
	Token             string
	Name              string
	Tags              []string
	MaxConcurrent     int
	WorkspaceCacheDir string
	HeartbeatInterval time.Duration
	LogPushInterval   time.Duration
	DrainTimeout      time.Duration
	// RetryMinInterval and RetryMaxInterval bound the backoff between
	// attempts while the server is unreachable; the worker never gives up.
	RetryMinInterval time.Duration
	RetryMaxInterval time.Duration
	// SpoolDir keeps step runs' log lines and results until the server has
	// them; SpoolMax bounds the undelivered bytes it holds, and a step whose
	// output finds it full waits for delivery to free room.
	SpoolDir string
	SpoolMax int64
	// WorkspaceLimits bound what one downloaded workspace may unpack to.
	WorkspaceLimits worker.WorkspaceLimits
	Docker          Docker
	Kubernetes      *Kubernetes
}

// LoadWorker reads and checks a worker config file.
func LoadWorker(path string) (*Worker, error) {
	if path == "" {
		return nil, errors.New("no config file: pass --config worker-config.yaml or set APPLIANCE_CONFIG")
	}
	var f workerFile
	if err := decodeConfigFile(path, &f); err != nil {
		return nil, err
	}
	cfg := &Worker{
		ServerURL:         f.ServerURL,
		Token:             f.WorkerToken,
		Name:              f.WorkerName,
		Tags:              f.Tags,
		MaxConcurrent:     1,
		WorkspaceCacheDir: f.WorkspaceCacheDir,
		Docker:            f.Docker,
		Kubernetes:        f.Kubernetes,
	}
	for i, u := range f.ServerURLs {
		if _, err := worker.ParseServerURL(u); err != nil {
			return nil, fmt.Errorf("%s: server_urls[%d]: %w", path, i, err)
		}
		if cfg.ServerURL == "" {
			cfg.ServerURL = u
		} else if u != cfg.ServerURL {
			cfg.ServerURLs = append(cfg.ServerURLs, u)
		}
	}
	if cfg.ServerURL == "" {
		return nil, fmt.Errorf("%s: server_url (or server_urls, one per replica) is required (e.g. http://appliance.internal:8080)", path)
	}
	if _, err := worker.ParseServerURL(cfg.ServerURL); err != nil {
		return nil, fmt.Errorf("%s: server_url: %w", path, err)
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("%s: worker_token is required (the server's worker_token)", path)
	}
	if cfg.Name == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "worker"
		}
		cfg.Name = host
	}
	if cfg.Tags == nil {
		cfg.Tags = []string{}
	}
	if f.MaxConcurrent != nil {
		if *f.MaxConcurrent < 1 {
			return nil, fmt.Errorf("%s: max_concurrent: must be at least 1, got %d", path, *f.MaxConcurrent)
		}
		cfg.MaxConcurrent = *f.MaxConcurrent
	}
	if cfg.WorkspaceCacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("%s: workspace_cache_dir: no default (%w); set it", path, err)
		}
		cfg.WorkspaceCacheDir = filepath.Join(base, "appliance", "workspaces")
	}
	for _, d := range []struct {
		key, value string
		def        time.Duration
		out        *time.Duration
	}{
		{"heartbeat_interval", f.HeartbeatInterval, 30 * time.Second, &cfg.HeartbeatInterval},
		{"log_push_interval", f.LogPushInterval, time.Second, &cfg.LogPushInterval},
		{"drain_timeout", f.DrainTimeout, 10 * time.Minute, &cfg.DrainTimeout},
		{"retry_min_interval", f.RetryMinInterval, 250 * time.Millisecond, &cfg.RetryMinInterval},
		{"retry_max_interval", f.RetryMaxInterval, 5 * time.Second, &cfg.RetryMaxInterval},
	} {
		*d.out = d.def
		if d.value == "" {
			continue
		}
		v, err := time.ParseDuration(d.value)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: %s: want a positive duration like 30s or 5m, got %q", path, d.key, d.value)
		}
		*d.out = v
	}
	if cfg.RetryMaxInterval < cfg.RetryMinInterval {
		return nil, fmt.Errorf("%s: retry_max_interval (%s) is below retry_min_interval (%s)", path, cfg.RetryMaxInterval, cfg.RetryMinInterval)
	}
	cfg.SpoolDir = f.SpoolDir
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = defaultSpoolDir(cfg.WorkspaceCacheDir, cfg.Name)
	}
	cfg.SpoolMax = worker.DefaultSpoolMax
	if err := parseSize("spool_max", f.SpoolMax, &cfg.SpoolMax); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	wl, err := f.WorkspaceLimits.parse()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	cfg.WorkspaceLimits = wl
	if _, err := cfg.Kubernetes.RunnerConfig(cfg.ServerURL); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// parse checks the section and fills in the defaults.
func (s WorkspaceLimitsSection) parse() (worker.WorkspaceLimits, error) {
	l := worker.DefaultWorkspaceLimits
	if err := parseSize("workspace_limits.total_size", s.TotalSize, &l.TotalSize); err != nil {
		return l, err
	}
	if err := parseSize("workspace_limits.file_size", s.FileSize, &l.FileSize); err != nil {
		return l, err
	}
	if s.Files != nil {
		if *s.Files < 1 {
			return l, fmt.Errorf("workspace_limits.files: must be at least 1, got %d", *s.Files)
		}
		l.Files = *s.Files
	}
	if s.Ratio != nil {
		if *s.Ratio < 1 {
			return l, fmt.Errorf("workspace_limits.ratio: must be at least 1 (uncompressed bytes per compressed byte), got %d", *s.Ratio)
		}
		l.Ratio = *s.Ratio
	}
	return l, nil
}

// defaultSpoolDir is <workspace_cache_dir>/.spool/<worker name>: beside
// the worker's other cached data (no workspace name starts with a dot),
// one per worker name, so workers sharing a cache dir each have theirs.
func defaultSpoolDir(cacheDir, name string) string {
	return filepath.Join(cacheDir, ".spool", DefaultSpoolDirName(name))
}

// DefaultSpoolDirName is name as one safe path element.
func DefaultSpoolDirName(name string) string {
	safe := []byte(name)
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			safe[i] = '_'
		}
	}
	if s := string(safe); s == "" || s == "." || s == ".." {
		return "worker"
	}
	return string(safe)
}
