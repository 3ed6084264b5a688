package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/store"
)

func TestServerConfigDefaultsNeedNoFile(t *testing.T) {
	cfg, err := LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.DataDir != "data" || *cfg.Workers != runtime.NumCPU() ||
		cfg.Workspaces["examples"].Path != "examples" || cfg.LogStorage.LocalDir != "" || cfg.LogDir() != filepath.Join("data", "logs") ||
		cfg.Effective.HeartbeatTimeout != 90*time.Second || cfg.WorkerToken != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestServerConfigFile(t *testing.T) {
	t.Setenv("APPLIANCE_TEST_TOKEN", "tok")
	cases := []struct {
		name, yaml, wantErr string
		check               func(*Server) bool
	}{
		{name: "every key", yaml: `listen: 0.0.0.0:9000
data_dir: /var/lib/appliance
workspaces:
  ops: {type: folder, path: /srv/ops}
worker_token: ${APPLIANCE_TEST_TOKEN}
workers: 0
worker_tags: [local]
heartbeat_timeout: 5s
drain_timeout: 30s
log_storage:
  local_dir: /var/log/appliance
`, check: func(c *Server) bool {
			return c.Listen == "0.0.0.0:9000" && c.WorkerToken == "tok" && *c.Workers == 0 &&
				c.Workspaces["ops"].Path == "/srv/ops" && len(c.Workspaces) == 1 && c.WorkerTags[0] == "local" &&
				c.Effective.HeartbeatTimeout == 5*time.Second && c.Effective.DrainTimeout == 30*time.Second && c.LogStorage.LocalDir == "/var/log/appliance"
		}},
		{name: "unknown key", yaml: "listen: x\nworkerz: 2\n", wantErr: ":2:1: "},
		{name: "wrong type", yaml: "workers: many\n", wantErr: ":1:10: "},
		{name: "negative workers", yaml: "workers: -1\n", wantErr: "workers: must be 0 or more"},
		{name: "workspace type", yaml: "workspaces: {a: {type: git, path: x}}\n", wantErr: `workspaces.a.type: unsupported type "git"`},
		{name: "workspace path", yaml: "workspaces: {a: {type: folder}}\n", wantErr: "workspaces.a.path: required"},
		{name: "heartbeat", yaml: "heartbeat_timeout: soon\n", wantErr: `heartbeat_timeout: "soon" is not a positive duration`},
		{name: "drain", yaml: "drain_timeout: -1s\n", wantErr: `drain_timeout: "-1s" is not a positive duration`},
		{name: "worker protocol by default", yaml: "listen: x\n", check: func(c *Server) bool { return c.WorkerProtocol == "appliance" }},
		{name: "worker protocol interface", yaml: "worker_protocol: interface\n", check: func(c *Server) bool { return c.WorkerProtocol == "interface" }},
		{name: "worker protocol unknown", yaml: "worker_protocol: lax\n", wantErr: `worker_protocol: want appliance or interface, got "lax"`},
		{name: "retention unset keeps forever", yaml: "listen: x\n", check: func(c *Server) bool {
			return c.Effective.Retention == store.Retention{}
		}},
		{name: "retention in days and hours", yaml: "retention: {jobs: 30d, logs: 12h}\n", check: func(c *Server) bool {
			return c.Effective.Retention == store.Retention{Jobs: 30 * 24 * time.Hour, Logs: 12 * time.Hour}
		}},
		{name: "retention mixed", yaml: "retention: {logs: 1d12h}\n", check: func(c *Server) bool {
			return c.Effective.Retention == store.Retention{Logs: 36 * time.Hour}
		}},
		{name: "retention unit", yaml: "retention: {jobs: 30 days}\n", wantErr: `retention.jobs: "30 days" is not an age; write a positive number of days or hours, such as 30d`},
		{name: "retention zero", yaml: "retention: {logs: 0d}\n", wantErr: `retention.logs: "0d" is not an age`},
		{name: "retention negative", yaml: "retention: {jobs: -5d}\n", wantErr: `retention.jobs: "-5d" is not an age`},
		{name: "retention negative hours", yaml: "retention: {jobs: 1d-5h}\n", wantErr: `retention.jobs: "1d-5h" is not an age`},
		{name: "retention bare number", yaml: "retention: {jobs: 30}\n", wantErr: `retention.jobs: "30" is not an age`},
		{name: "retention overflow", yaml: "retention: {jobs: 99999999d}\n", wantErr: `retention.jobs: "99999999d" is not an age`},
		{name: "retention unknown key", yaml: "retention: {job: 30d}\n", wantErr: ":1:"},
		{name: "trusted proxies", yaml: "trusted_proxies: [10.0.0.0/8, 192.0.2.7, 'fd00::/8', 10.1.2.3/16]\n", check: func(c *Server) bool {
			return fmt.Sprint(c.TrustedProxyPrefixes()) == "[10.0.0.0/8 192.0.2.7/32 fd00::/8 10.1.0.0/16]"
		}},
		{name: "trusted proxy not a CIDR", yaml: "listen: x\ntrusted_proxies:\n  - 10.0.0.0/8\n  - proxy.example.com\n",
			wantErr: `:4:5: trusted_proxies: "proxy.example.com" is not a CIDR`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadConfigText(t, c.yaml)
			if configErrorChecked(t, err, c.wantErr) {
				return
			}
			if !c.check(cfg) {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}

// loadConfigText loads yaml as server-config.yaml.
func loadConfigText(t *testing.T, yaml string) (*Server, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "server-config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return LoadServer(path)
}

// configErrorChecked asserts a config load's error: one containing want
// when want is set (then it reports true: nothing more to check), else none.
func configErrorChecked(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
