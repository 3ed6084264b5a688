package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners/worker"
)

func TestLoadWorkerConfig(t *testing.T) {
	t.Setenv("APPLIANCE_TEST_WORKER_TOKEN", "from-env")
	cacheBase, _ := os.UserCacheDir()
	for _, tc := range []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *config.Worker)
		err   string // substring of the error, after "<file>:"
	}{
		{"defaults", "server_url: http://127.0.0.1:8080\nworker_token: t\n", func(t *testing.T, c *config.Worker) {
			host, _ := os.Hostname()
			if c.Name != host || c.MaxConcurrent != 1 || len(c.Tags) != 0 ||
				c.HeartbeatInterval != 30*time.Second || c.LogPushInterval != time.Second || c.DrainTimeout != 10*time.Minute ||
				c.WorkspaceCacheDir != filepath.Join(cacheBase, "appliance", "workspaces") ||
				c.RetryMinInterval != 250*time.Millisecond || c.RetryMaxInterval != 5*time.Second ||
				c.SpoolDir != filepath.Join(c.WorkspaceCacheDir, ".spool", config.DefaultSpoolDirName(host)) || c.SpoolMax != 1<<30 ||
				c.WorkspaceLimits != (worker.WorkspaceLimits{TotalSize: 1 << 30, Files: 100_000, FileSize: 512 << 20, Ratio: 100, RatioFloor: 1 << 20}) {
				t.Fatalf("defaults %+v", c)
			}
		}, ""},
		{"everything set", `server_url: https://appliance.example.com/
worker_token: ${APPLIANCE_TEST_WORKER_TOKEN}
worker_name: gpu-box
tags: [gpu, linux]
max_concurrent: 4
workspace_cache_dir: /var/cache/ws
heartbeat_interval: 5s
log_push_interval: 250ms
drain_timeout: 1m
retry_min_interval: 100ms
retry_max_interval: 1m
spool_dir: /var/spool/appliance
spool_max: 200MB
workspace_limits:
  total_size: 2GB
  files: 500
  file_size: 64MB
  ratio: 1000
`, func(t *testing.T, c *config.Worker) {
			if c.Token != "from-env" || c.Name != "gpu-box" || strings.Join(c.Tags, ",") != "gpu,linux" || c.MaxConcurrent != 4 ||
				c.WorkspaceCacheDir != "/var/cache/ws" || c.HeartbeatInterval != 5*time.Second ||
				c.LogPushInterval != 250*time.Millisecond || c.DrainTimeout != time.Minute ||
				c.RetryMinInterval != 100*time.Millisecond || c.RetryMaxInterval != time.Minute ||
				c.SpoolDir != "/var/spool/appliance" || c.SpoolMax != 200<<20 ||
				c.WorkspaceLimits != (worker.WorkspaceLimits{TotalSize: 2 << 30, Files: 500, FileSize: 64 << 20, Ratio: 1000, RatioFloor: 1 << 20}) {
				t.Fatalf("decoded %+v", c)
			}
		}, ""},
		{"default spool of an odd worker name", "server_url: http://x\nworker_token: t\nworker_name: a/b c\nworkspace_cache_dir: /c\n", func(t *testing.T, c *config.Worker) {
			if c.SpoolDir != "/c/.spool/a_b_c" {
				t.Fatalf("spool_dir %q", c.SpoolDir)
			}
		}, ""},
		{"bad spool_max", "server_url: http://x\nworker_token: t\nspool_max: lots\n", nil, `spool_max: "lots" is not a positive size`},
		{"bad workspace total_size", "server_url: http://x\nworker_token: t\nworkspace_limits: {total_size: huge}\n", nil, `workspace_limits.total_size: "huge" is not a positive size`},
		{"bad workspace file_size", "server_url: http://x\nworker_token: t\nworkspace_limits: {file_size: -1MB}\n", nil, `workspace_limits.file_size: "-1MB" is not a positive size`},
		{"zero workspace files", "server_url: http://x\nworker_token: t\nworkspace_limits: {files: 0}\n", nil, "workspace_limits.files: must be at least 1, got 0"},
		{"zero workspace ratio", "server_url: http://x\nworker_token: t\nworkspace_limits: {ratio: 0}\n", nil, "workspace_limits.ratio: must be at least 1"},
		{"unknown workspace limit", "server_url: http://x\nworker_token: t\nworkspace_limits: {total: 1GB}\n", nil, `unknown field "total"`},
		{"retry bounds reversed", "server_url: http://x\nworker_token: t\nretry_min_interval: 10s\nretry_max_interval: 1s\n", nil, "retry_max_interval (1s) is below retry_min_interval (10s)"},
		{"no server url", "worker_token: t\n", nil, "server_url (or server_urls, one per replica) is required"},
		{"bad server url", "server_url: 127.0.0.1:8080\nworker_token: t\n", nil, "server_url: server url"},
		{"no token", "server_url: http://x\n", nil, "worker_token is required"},
		{"token from an unset variable", "server_url: http://x\nworker_token: ${APPLIANCE_TEST_UNSET_VAR}\n", nil, "2:15: environment variable APPLIANCE_TEST_UNSET_VAR is not set"},
		{"token from an unset variable allowed empty", "server_url: http://x\nworker_token: ${APPLIANCE_TEST_UNSET_VAR:-}\n", nil, "worker_token is required"},
		{"bad duration", "server_url: http://x\nworker_token: t\nheartbeat_interval: 30\n", nil, `heartbeat_interval: want a positive duration like 30s or 5m, got "30"`},
		{"zero concurrency", "server_url: http://x\nworker_token: t\nmax_concurrent: 0\n", nil, "max_concurrent: must be at least 1, got 0"},
		{"unknown key", "server_url: http://x\nworker_token: t\nmax_concurent: 2\n", nil, "3:1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "worker-config.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := config.LoadWorker(path)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), path+":") || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %s: ...%s", err, path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
	if _, err := config.LoadWorker(""); err == nil || !strings.Contains(err.Error(), "APPLIANCE_CONFIG") {
		t.Fatalf("no config path: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe to write from the worker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRemoteWorker runs `appliance worker` against url until the test ends.
func startRemoteWorker(t *testing.T, url, token, extra string) (stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "worker-config.yaml")
	cfg := fmt.Sprintf("server_url: %s\nworker_token: %s\nworker_name: remote-1\nworkspace_cache_dir: %s\n"+
		"heartbeat_interval: 200ms\nlog_push_interval: 100ms\n%s", url, token, filepath.Join(dir, "cache"), extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() { code <- app.WorkerMain(ctx, path, stdout, stderr) }()
	var once sync.Once
	result := -1
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case result = <-code:
			case <-time.After(30 * time.Second):
				t.Error("worker did not stop")
			}
		})
		return result
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

func TestRemoteWorkerRunsStepsOfARealServer(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, `
tasks:
  remote:
    input:
      name:
        type: string
        default: world
    flow:
      greet:
        type: script
        tags: [remote]
        script: |
          echo "hello {{ input.name }}"
          echo 'OUTPUT: {"greeting": "hello {{ input.name }}"}'
      from-file:
        depends_on: [greet]
        type: script
        tags: [remote]
        language: python
        source: scripts/shout.py
        input:
          text: "{{ greet.output.greeting }}"
`)
	os.MkdirAll(filepath.Join(ws, "scripts"), 0o755)
	os.WriteFile(filepath.Join(ws, "scripts", "shout.py"), []byte(
		"import json, os\nprint('OUTPUT: ' + json.dumps({'shout': os.environ['INPUT_TEXT'].upper()}))\n"), 0o644)

	f := startFixture(t, map[string]string{"main": ws}, 0, func(c *config.Server) { c.WorkerToken = "worker-secret" })
	stdout, _, stop := startRemoteWorker(t, f.url, "worker-secret", "tags: [remote]\n")

	id := f.execute("main", "remote", map[string]any{"name": "remote"})
	j := f.waitTerminal(id)
	if j.Status != "completed" {
		t.Fatalf("job %s, steps %+v", j.Status, j.Steps)
	}
	if out, _ := j.step("from-file").Output.(map[string]any); out["shout"] != "HELLO REMOTE" {
		t.Fatalf("from-file output %v", j.step("from-file").Output)
	}
	if logs := f.logs(id, "greet"); !strings.Contains(logs, `"line":"hello remote"`) {
		t.Fatalf("greet log %q lacks the pushed line", logs)
	}
	if code := stop(); code != 0 {
		t.Fatalf("worker exited %d after a graceful stop", code)
	}
	if s := stdout.String(); !strings.Contains(s, "worker_name:         remote-1") || strings.Contains(s, "worker-secret") {
		t.Fatalf("settings printed:\n%s", s)
	}
}

func TestRemoteWorkerExitsOnARejectedToken(t *testing.T) {
	f := startFixture(t, map[string]string{}, 0, func(c *config.Server) { c.WorkerToken = "right" })
	_, stderr, stop := startRemoteWorker(t, f.url, "wrong", "")
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "worker token rejected by server") {
		if time.Now().After(deadline) {
			t.Fatalf("no rejection message; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := stop(); code != 1 {
		t.Fatalf("exit code %d, want 1", code)
	}
}
