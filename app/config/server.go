package config

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/agent"
	"github.com/appliance-sh/appliance/store"
)

// Server is server-config.yaml. Every field has a default, so the
// server runs with no file at all.
type Server struct {
	Listen      string               `yaml:"listen"`
	DataDir     string               `yaml:"data_dir"`
	Workspaces  map[string]Workspace `yaml:"workspaces"`
	WorkerToken string               `yaml:"worker_token"`
	LogStorage  LogStorage           `yaml:"log_storage"`
	// Workers is the number of steps the in-process worker pool runs at
	// once; 0 turns the pool off. Default: one per CPU.
	Workers    *int     `yaml:"workers"`
	WorkerTags []string `yaml:"worker_tags"`
	// Docker configures the in-process pool's docker runner, added when a
	// Docker daemon answers at start-up.
	Docker Docker `yaml:"docker"`
	// Kubernetes, when present, gives the in-process pool the pod runner
	// (its server_url is where pods reach this server).
	Kubernetes *Kubernetes `yaml:"kubernetes"`
	// WorkerProtocol is how strictly remote workers must prove who they
	// are: "appliance" (default) wants the secret each worker gets at
	// registration on every report; "interface" also serves workers that
	// send the interface's bodies to the letter (no secret, no worker_id
	// on log pushes and results), which is weaker: any holder of the
	// worker token may report as such a worker.
	WorkerProtocol string `yaml:"worker_protocol"`
	// HeartbeatTimeout is how long a remote worker may be silent before it
	// is inactive and its running steps fail (3 heartbeat intervals).
	HeartbeatTimeout string `yaml:"heartbeat_timeout"`
	// DrainTimeout is how long the in-process workers' running steps may
	// go on after SIGTERM before they are killed and failed.
	DrainTimeout string `yaml:"drain_timeout"`
	// Auth turns authentication on; nil = off (auth.go).
	Auth *Auth `yaml:"auth"`
	// ACL limits what each user may see and do per task; needs Auth
	// (acl.go).
	ACL *ACL `yaml:"acl"`
	// InsecureNoAuth lets a server with auth off listen on a non-loopback
	// address; without it such a server refuses to start.
	InsecureNoAuth bool `yaml:"insecure_no_auth"`
	// AllowedHosts are Host header values /api accepts besides loopback
	// names and the listen address (a reverse proxy's public name).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are origins (scheme://host[:port]) whose browsers may
	// make state-changing /api requests besides the server's own.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// TrustedProxies are the reverse proxies (CIDRs) whose
	// X-Forwarded-For or Forwarded header names the client, for the
	// per-address login limit and the logs; from any other peer those
	// headers are ignored.
	TrustedProxies []TrustedProxy `yaml:"trusted_proxies"`
	// MetricsToken is a bearer token a Prometheus scraper may read /metrics
	// with when auth is on, besides any user's token or API key.
	MetricsToken string `yaml:"metrics_token"`
	// Limits bound what one request, step, template or login may cost.
	Limits LimitsSection `yaml:"limits"`
	// Retention says how long ended jobs and their local logs are kept;
	// unset keeps them forever.
	Retention RetentionSection `yaml:"retention"`
	// Agents are the language model providers agent steps call
	// (agents/config.go); none configured = agent steps fail when run.
	Agents agent.Config `yaml:"agents"`
	// Storage is where the state lives: bbolt under data_dir (default) or
	// PostgreSQL (storage.go).
	Storage Storage `yaml:"storage"`
	// HA makes the server one replica of several on one PostgreSQL
	// database, one of which leads (ha.go).
	HA HA `yaml:"ha"`
	// Queues are named concurrency limits across tasks, which a task
	// joins with `queue: NAME` (queues.go).
	Queues map[string]Queue `yaml:"queues"`
	// Audit keys and keeps the audit trail (audit.go).
	Audit Audit `yaml:"audit"`

	// Effective is what LoadServer derived from the sections above; the
	// server is wired from these (tests may change them after loading).
	Effective Effective `yaml:"-"`
	// Test holds what only tests and benchmarks set (no file can).
	Test TestHooks `yaml:"-"`
}

// Effective holds the values LoadServer parses and defaults from the
// sections as written.
type Effective struct {
	HeartbeatTimeout time.Duration
	DrainTimeout     time.Duration
	Limits           Limits
	Retention        store.Retention
	// ACL is the acl section built, nil without one.
	ACL *accounts.ACL
}

// TestHooks change a server in ways only tests and benchmarks need; the
// zero value is the production behaviour.
type TestHooks struct {
	// Runners replaces runners of the in-process pool by name (benchmarks
	// put a no-op "local" runner here to time orchestration alone).
	Runners map[string]runners.Runner
	// EngineClock replaces the engine's wall clock (a test counts the
	// timers it arms).
	EngineClock engine.Clock
	// SweepInterval is the time between retention sweeps (10 minutes when
	// 0; tests shorten it).
	SweepInterval time.Duration
	// HeaderTimeout is how long a client may take to send its request
	// headers (10s when 0; tests shorten it).
	HeaderTimeout time.Duration
	// LogBuffer bounds the undelivered log lines each in-process step run
	// holds (worker.DefaultLogBuffer when 0; tests shrink it).
	LogBuffer int64
	// NoEventSources leaves event_source triggers unstarted (tests of
	// other features on the examples workspace, whose consumer would hold
	// a worker slot and add a job).
	NoEventSources bool
	// AuditOff keeps the store's audit key unset, so no entry is written:
	// the benchmarks' baseline for the trail's cost.
	AuditOff bool
}

// The values of worker_protocol.
const (
	WorkerProtocolAppliance = "appliance"
	WorkerProtocolInterface = "interface"
)

// Workspace locates one workspace.
type Workspace struct {
	Type string `yaml:"type"` // folder
	Path string `yaml:"path"`
}

// LogStorage is the log_storage section.
type LogStorage struct {
	LocalDir string    `yaml:"local_dir"`
	Archive  *Archive  `yaml:"archive"` // finished jobs' logs; wins over S3
	S3       *LegacyS3 `yaml:"s3"`      // legacy form of an s3 archive
}

// LoadServer reads path (none when empty) and fills in the defaults.
func LoadServer(path string) (*Server, error) {
	cfg := &Server{}
	if path != "" {
		if err := decodeConfigFile(path, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "data"
	}
	if cfg.Storage.Type == "" {
		cfg.Storage.Type = StorageBbolt // no section, or an empty one
	}
	if len(cfg.Workspaces) == 0 {
		cfg.Workspaces = map[string]Workspace{"examples": {Type: "folder", Path: "examples"}}
	}
	for name, ws := range cfg.Workspaces {
		if ws.Type == "" {
			ws.Type = "folder"
		}
		if ws.Type != "folder" {
			return nil, fmt.Errorf("workspaces.%s.type: unsupported type %q (supported: folder)", name, ws.Type)
		}
		if ws.Path == "" {
			return nil, fmt.Errorf("workspaces.%s.path: required", name)
		}
		cfg.Workspaces[name] = ws
	}
	if _, _, err := cfg.LogStorage.EffectiveArchive(); err != nil {
		return nil, err
	}
	if err := cfg.validateHA(); err != nil {
		return nil, err
	}
	if err := cfg.validateAudit(); err != nil {
		return nil, err
	}
	if err := cfg.Auth.validate(); err != nil {
		return nil, err
	}
	var err error
	if cfg.Effective.ACL, err = cfg.ACL.Build(cfg.Auth); err != nil {
		return nil, err
	}
	if cfg.Workers == nil {
		n := runtime.NumCPU()
		cfg.Workers = &n
	}
	if *cfg.Workers < 0 {
		return nil, fmt.Errorf("workers: must be 0 or more, got %d", *cfg.Workers)
	}
	switch cfg.WorkerProtocol {
	case "":
		cfg.WorkerProtocol = WorkerProtocolAppliance
	case WorkerProtocolAppliance, WorkerProtocolInterface:
	default:
		return nil, fmt.Errorf("worker_protocol: want %s or %s, got %q", WorkerProtocolAppliance, WorkerProtocolInterface, cfg.WorkerProtocol)
	}
	if cfg.Effective.HeartbeatTimeout, err = positiveDuration("heartbeat_timeout", cfg.HeartbeatTimeout, 90*time.Second); err != nil {
		return nil, err
	}
	if cfg.Effective.DrainTimeout, err = positiveDuration("drain_timeout", cfg.DrainTimeout, 10*time.Minute); err != nil {
		return nil, err
	}
	if cfg.Effective.Limits, err = cfg.Limits.parse(); err != nil {
		return nil, err
	}
	if cfg.Effective.Retention, err = cfg.Retention.parse(); err != nil {
		return nil, err
	}
	if err := checkAllowedOrigins(cfg.AllowedOrigins); err != nil {
		return nil, err
	}
	if err := cfg.Agents.Validate(); err != nil {
		return nil, err
	}
	if err := validateQueues(cfg.Queues); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Path returns the --config flag's value, or $APPLIANCE_CONFIG.
func Path(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv("APPLIANCE_CONFIG")
}

// LogDir is where local job logs go: log_storage.local_dir, by default
// "logs" under data_dir (decided once data_dir is final, after the
// command-line flags), so the logs live and move with the database.
func (c *Server) LogDir() string {
	if c.LogStorage.LocalDir != "" {
		return c.LogStorage.LocalDir
	}
	return filepath.Join(c.DataDir, "logs")
}

// DBPath is where the server keeps its bbolt file.
func (c *Server) DBPath() string { return filepath.Join(c.DataDir, "appliance.db") }

// positiveDuration parses a duration setting, or gives its default when unset.
func positiveDuration(key, value string, def time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration", key, value)
	}
	return d, nil
}

// RetentionSection is the retention section: `jobs` deletes ended jobs
// (records, steps, local logs) that ended longer ago than it; `logs`
// deletes only the local log files. Archived logs stay.
type RetentionSection struct {
	Jobs string `yaml:"jobs"`
	Logs string `yaml:"logs"`
}

func (r RetentionSection) parse() (store.Retention, error) {
	var out store.Retention
	var err error
	if out.Jobs, err = retentionAge("retention.jobs", r.Jobs); err != nil {
		return out, err
	}
	if out.Logs, err = retentionAge("retention.logs", r.Logs); err != nil {
		return out, err
	}
	return out, nil
}

// maxRetentionDays keeps an age well inside time.Duration's range.
const maxRetentionDays = 36500

// retentionAge parses an age such as 30d, 12h or 1d12h; empty is 0, for
// keep forever. Days are 24 hours: Go durations have no day unit.
func retentionAge(key, value string) (time.Duration, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, nil
	}
	bad := fmt.Errorf("%s: %q is not an age; write a positive number of days or hours, such as 30d, 12h or 1d12h (unset keeps forever)", key, value)
	var days time.Duration
	rest := value
	if i := strings.IndexByte(value, 'd'); i >= 0 {
		n, err := strconv.ParseUint(value[:i], 10, 32)
		if err != nil || n > maxRetentionDays {
			return 0, bad
		}
		days, rest = time.Duration(n)*24*time.Hour, value[i+1:]
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return 0, bad
		}
	}
	if d > maxRetentionDays*24*time.Hour || days+d <= 0 {
		return 0, bad
	}
	return days + d, nil
}

func DescribeRetention(r store.Retention) string {
	age := func(d time.Duration) string {
		switch {
		case d == 0:
			return "forever"
		case d%(24*time.Hour) == 0:
			return strconv.Itoa(int(d/(24*time.Hour))) + "d"
		}
		return d.String()
	}
	return "jobs " + age(r.Jobs) + ", local logs " + age(r.Logs)
}
