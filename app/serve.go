package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/api/dispatch"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/app/metrics"
	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
	"github.com/appliance-sh/appliance/runners/agent"
	"github.com/appliance-sh/appliance/runners/worker"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/ui"
)

// Version is the server version reported by /api/config; set at build time
// with -ldflags "-X github.com/appliance-sh/appliance/app.Version=...".
var Version = "0.1.0-dev"

func init() { commands["serve"] = runServe }

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFlag := fs.String("config", "", "server config file (default $APPLIANCE_CONFIG, or none)")
	listen := fs.String("listen", "", "address to listen on (overrides the config)")
	dataDir := fs.String("data-dir", "", "data directory (overrides the config)")
	workspace := fs.String("workspace", "", "serve this folder as the only workspace (overrides the config)")
	workers := fs.Int("workers", -1, "in-process worker slots, 0 = none (overrides the config)")
	insecure := fs.Bool("insecure-no-auth", false, "serve a non-loopback address with auth off (anyone who reaches it can run code)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.LoadServer(config.Path(*configFlag))
	if err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *workspace != "" {
		cfg.Workspaces = map[string]config.Workspace{workspaceName(*workspace): {Type: "folder", Path: *workspace}}
	}
	if *workers >= 0 {
		cfg.Workers = workers
	}
	if *insecure {
		cfg.InsecureNoAuth = true
	}
	if err := cfg.CheckExposure(); err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 2
	}

	TuneRuntime()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := Start(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 1
	}
	printSettings(stdout, cfg, srv.Addr(), srv.workerTags, srv.consumerSlots)
	// SIGHUP reloads the acl section of the config (aclreload.go).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for running := true; running; {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			running = false
		case <-srv.Failed():
			log.Error("a server component failed; shutting down")
			running = false
		case <-hup:
			if acl, err := reloadACL(config.Path(*configFlag), cfg.Effective.ACL); err != nil {
				log.Error(err.Error())
				srv.trail.record(audit.ConfigReload, audit.Failed, err.Error())
			} else {
				log.Info("acl reloaded", "acl", acl)
				srv.trail.record(audit.ConfigReload, audit.OK, "acl: "+acl)
			}
		}
	}
	if err := srv.Shutdown(); err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 1
	}
	return 0
}

// serverGCPercent is the server's garbage collection target. Its live heap
// is small (a few MiB: the active jobs), so Go's default of collecting each
// time it doubles means collecting very often under load; at 4x the
// collector's share of a busy server's CPU falls by about two thirds for a
// few more MiB of memory. GOGC in the environment still wins.
const serverGCPercent = 400

// TuneRuntime sets the garbage collection target `appliance serve` runs
// with (serverGCPercent), unless GOGC is set.
func TuneRuntime() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serverGCPercent)
	}
}

// workspaceName names a workspace after its folder.
func workspaceName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "default"
	}
	return filepath.Base(abs)
}

func printSettings(w io.Writer, cfg *config.Server, addr string, workerTags []string, consumerSlots int) {
	fmt.Fprintf(w, "appliance %s serving on http://%s\n", Version, addr)
	fmt.Fprintf(w, "  data_dir:              %s\n", cfg.DataDir)
	fmt.Fprintf(w, "  storage:               %s\n", cfg.Storage.Describe(cfg.DBPath()))
	fmt.Fprintf(w, "  log_storage.local_dir: %s\n", cfg.LogDir())
	fmt.Fprintf(w, "  log_storage.archive:   %s\n", cfg.LogStorage.DescribeArchive())
	names := make([]string, 0, len(cfg.Workspaces))
	for name := range cfg.Workspaces {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  workspace %-12s %s\n", name+":", cfg.Workspaces[name].Path)
	}
	consumers := ""
	if consumerSlots > 0 {
		consumers = fmt.Sprintf(" (+%d for event-source consumers)", consumerSlots)
	}
	fmt.Fprintf(w, "  workers (in-process):  %d%s, tags %v\n", *cfg.Workers, consumers, workerTags)
	token := "not set (remote workers cannot join)"
	if cfg.WorkerToken != "" {
		token = "set"
	}
	fmt.Fprintf(w, "  worker_token:          %s\n", token)
	fmt.Fprintf(w, "  worker_protocol:       %s\n", describeWorkerProtocol(cfg.WorkerProtocol))
	fmt.Fprintf(w, "  heartbeat_timeout:     %s\n", cfg.Effective.HeartbeatTimeout)
	fmt.Fprintf(w, "  drain_timeout:         %s\n", cfg.Effective.DrainTimeout)
	fmt.Fprintf(w, "  retention:             %s\n", config.DescribeRetention(cfg.Effective.Retention))
	fmt.Fprintf(w, "  auth:                  %s\n", cfg.Auth.Describe())
	if cfg.ACL != nil {
		fmt.Fprintf(w, "  acl:                   %s\n", cfg.ACL.Describe())
	}
	fmt.Fprintf(w, "  metrics:               %s\n", describeMetrics(cfg))
	fmt.Fprintf(w, "  agents:                %s\n", cfg.Agents.Describe())
	fmt.Fprintf(w, "  queues:                %s\n", config.DescribeQueues(cfg.Queues))
	if len(cfg.AllowedHosts) > 0 {
		fmt.Fprintf(w, "  allowed_hosts:         %s\n", strings.Join(cfg.AllowedHosts, ", "))
	}
	if len(cfg.AllowedOrigins) > 0 {
		fmt.Fprintf(w, "  allowed_origins:       %s\n", strings.Join(cfg.AllowedOrigins, ", "))
	}
	if len(cfg.TrustedProxies) > 0 {
		fmt.Fprintf(w, "  trusted_proxies:       %v\n", cfg.TrustedProxyPrefixes())
	}
	if cfg.ExposedWithoutAuth() {
		fmt.Fprintf(w, "  insecure_no_auth:      true (WARNING: auth is off on a network address; anyone who reaches it can run code)\n")
	}
}

func describeWorkerProtocol(p string) string {
	if p == config.WorkerProtocolInterface {
		return p + " (weaker: workers without a secret are served, and any holder of the worker token may report as them)"
	}
	return p + " (each remote worker proves who it is with its own secret)"
}

func describeMetrics(cfg *config.Server) string {
	switch {
	case cfg.Auth == nil:
		return "/metrics, open (auth is off)"
	case cfg.MetricsToken != "":
		return "/metrics, needs a user token, an API key or metrics_token (set)"
	}
	return "/metrics, needs a user token or an API key (metrics_token not set)"
}

// Server is a running appliance server.
type Server struct {
	cfg      *config.Server
	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	storage  *storage
	archive  *store.ArchivingLogs // nil unless log_storage archives logs
	// current is the engine the API and the worker service call: the
	// term's (see term), none while a replica follows.
	current *currentEngine
	// protocol serves the worker protocol to both transports: the HTTP
	// handlers and the in-process pool.
	protocol *dispatch.Service
	metrics  *metrics.Registry
	ready    *readiness
	// workerTags are the in-process workers' tags: worker_tags plus the
	// runner capabilities found (docker).
	workerTags []string
	// consumerSlots are the in-process slots kept for event sources'
	// consumer steps, apart from the cfg.Workers job slots.
	consumerSlots int

	// What each term is built from.
	registry *workspace.Registry
	sink     meteredLogs
	agents   engine.AgentCaller
	pool     worker.Config // the in-process pool's

	sup          *supervisor
	watcher, api *component
	revisions    *revisions

	// termMu guards term: the leader's part, from start to shutdown on a
	// lone server, while it leads on a replica of a pair.
	termMu sync.Mutex
	term   *term
	// ha is the pair's side (ha.go); nil on a lone server.
	ha *replica
	// trail is the audit trail's queue and head log (audit.go).
	trail      *auditTrail
	auditHeads *component
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Failed is closed once a supervised component has failed; Shutdown then
// returns its error.
func (s *Server) Failed() <-chan struct{} { return s.sup.failed.Done() }

// inProcessPart is the start-up part /readyz waits for while the
// in-process pool registers.
const inProcessPart = "the in-process workers to register"

// Start opens the storage (bbolt, or PostgreSQL: an unreachable database
// stops start-up here, before anything else), loads the workspaces and,
// on a lone server, the engine's state (failing here, before anything is
// served, if either cannot be loaded), then starts the HTTP server, the
// workspace watcher and the leader's part (term.go: the orchestrator,
// the scheduler, the event sources, the retention sweepers and the
// in-process workers) under one supervisor. A replica of a pair (ha)
// starts the leader's part only while it leads (ha.go).
func Start(ctx context.Context, cfg *config.Server, log *slog.Logger) (_ *Server, err error) {
	cfg.LogStorage.LocalDir = cfg.LogDir()
	// What is open so far, closed in reverse order if start-up fails.
	var opened []func() error
	defer func() {
		if err != nil {
			for i := len(opened) - 1; i >= 0; i-- {
				_ = opened[i]()
			}
		}
	}()

	st, err := openStorage(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opened = append(opened, st.Close)

	pool := worker.Config{
		Name:          hostname() + "-inprocess",
		Tags:          cfg.WorkerTags,
		MaxConcurrent: *cfg.Workers,
		DrainTimeout:  cfg.Effective.DrainTimeout,
		LogBuffer:     cfg.Test.LogBuffer,
		Runners:       maps.Clone(cfg.Test.Runners),
	}
	if *cfg.Workers > 0 {
		if err := detectRunners(ctx, cfg.Docker, cfg.Kubernetes, "", &pool, log.With("worker", "in-process")); err != nil {
			return nil, err
		}
	}
	dirs := map[string]string{}
	for name, ws := range cfg.Workspaces {
		dirs[name] = ws.Path
	}
	// With providers configured, a workspace naming another is a load
	// error; without, agent steps fail when run (the examples load).
	var loadOpts workspace.LoadOptions
	if cfg.Agents.Configured() {
		loadOpts.Providers = cfg.Agents.IDs()
	}
	// A task joining a queue the config does not name is a load error.
	loadOpts.Queues = config.QueueNames(cfg.Queues)
	registry, err := workspace.NewRegistry(dirs, nil, log, loadOpts)
	if err != nil {
		return nil, err
	}
	revs := openRevisions(st.snapshots, cfg.DataDir, cfg.Effective.Limits.WorkspaceSize, registry, loadOpts, log.With("component", "revisions"))
	agentCaller, err := agent.New(cfg.Agents, nil)
	if err != nil {
		return nil, err
	}
	if err := st.openRecords(cfg, revs.taskPath); err != nil {
		return nil, err
	}
	st.logs.SetLimits(store.LogLimits{StepLog: cfg.Effective.Limits.StepLog, LogLine: cfg.Effective.Limits.LogLine})
	jobLogs, archive, err := openArchive(cfg.LogStorage, st, log)
	if err != nil {
		return nil, err
	}
	if archive != nil {
		opened = append(opened, archive.Close)
	}
	current := &currentEngine{}
	reg := metrics.New(current.Stats)
	if st.pool != nil {
		reg.WatchPool(st.pool)
	}
	trail, err := openAudit(cfg, st.state, reg, log)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, storage: st, archive: archive, current: current, metrics: reg, trail: trail,
		workerTags: pool.Tags, sup: newSupervisor(), revisions: revs, registry: registry,
		// The engine masks every line on its way in (engine.AppendLog): workers'
		// pushes reach the log through it, never straight to the sink.
		sink: meteredLogs{serverLogs: jobLogs, metrics: reg}, agents: agentCaller, pool: pool}
	revs.live = current.LiveRevisions

	var lone *term
	if cfg.HA.Enabled() {
		// From here every write of the state waits for the lease.
		if s.ha, err = newReplica(s); err != nil {
			return nil, err
		}
	} else {
		if created, err := seedInitialUser(ctx, st.users, cfg.Auth, time.Now()); err != nil {
			return nil, err
		} else if created {
			log.Info("created the initial admin user", "email", cfg.Auth.InitialUser.Email)
		}
		if lone, err = s.loadTerm(ctx); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.listener = ln
	if cfg.ExposedWithoutAuth() {
		log.Warn("auth is off and the server listens on a network address (insecure_no_auth): anyone who can reach "+
			ln.Addr().String()+" can run code on this machine; turn auth on or listen on 127.0.0.1", "listen", cfg.Listen)
	}

	if cfg.WorkerProtocol == config.WorkerProtocolInterface {
		log.Warn("worker_protocol: interface: workers that register without a secret are served, and any holder of the " +
			"worker token may push logs and results as them; leave it unset unless a worker of another make needs it")
	}

	var parts []string
	if *cfg.Workers > 0 && lone != nil {
		parts = append(parts, inProcessPart)
	}
	s.ready = newReadiness(parts...)
	health := &healthCheck{loop: current.Ready, write: st.state.CheckWrite}

	// An event source's consumer step runs as long as its source does:
	// with event sources, consumers get in-process slots of their own and
	// never hold the job slots.
	if *cfg.Workers > 0 && !cfg.Test.NoEventSources {
		s.consumerSlots = eventSourceCount(registry)
	}
	// The audit trail's head is logged as it grows, and at shutdown.
	trail.leading = func() bool { return s.currentTerm() != nil }
	s.auditHeads = s.sup.start("audit heads", trail.run)
	// The in-process pool's pods fetch workspaces over HTTP with tokens
	// the API checks, so both share one minter.
	stepTokens := api.NewStepTokens(0, nil)
	// One worker service answers remote and in-process workers alike.
	s.protocol = dispatch.New(current, dispatch.Config{MintStepToken: stepTokens.MintFor(current),
		InterfaceProtocol: cfg.WorkerProtocol == config.WorkerProtocolInterface})
	if lone != nil {
		s.startTerm(lone, s.sup)
	}
	s.watcher = s.sup.start("workspace watcher", registry.Watch)
	headerTimeout := cfg.Test.HeaderTimeout
	if headerTimeout == 0 {
		headerTimeout = defaultHeaderTimeout
	}
	s.http = &http.Server{
		Handler: s.ha.endStreams(api.New(api.Config{
			StepTokens:  stepTokens,
			Workers:     s.protocol,
			Engine:      current,
			Workspaces:  registry,
			Logs:        s.sink,
			WorkerToken: cfg.WorkerToken,
			Version:     Version,
			Logger:      log,
			UI:          ui.Handler(),
			Auth:        cfg.Auth.APIConfig(cfg.Effective.Limits),
			Users:       st.users,
			ACL:         cfg.Effective.ACL,
			Audit:       trail.store,
			AuditQueue:  trail.queue,
			OnDenied:    trail.denied,
			OnClaimed:   reg.ClaimAnswered,

			EventSources: currentEventSources{s},

			Health:       health.check,
			Ready:        s.ready.check,
			Metrics:      reg.Handler(),
			MetricsToken: cfg.MetricsToken,

			ListenAddr:     cfg.Listen,
			AllowedHosts:   cfg.AllowedHosts,
			AllowedOrigins: cfg.AllowedOrigins,
			TrustedProxies: cfg.TrustedProxyPrefixes(),
			MaxRequestBody: cfg.Effective.Limits.RequestBody,
			MaxWorkspace:   cfg.Effective.Limits.WorkspaceSize,
			Snapshots: func(ws, rev string) (io.ReadCloser, error) {
				return revs.snaps.Open(ws, rev)
			},
			MaxHeaderBytes:  maxHeaderBytes,
			BodyReadTimeout: bodyReadTimeout,
			HA:              s.ha.apiConfig(),
		})),
		// No ReadTimeout: its deadline would end long-polls and outlive a
		// WebSocket hijack; the api bounds each request body instead.
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    netHTTPMaxHeaderBytes,
	}
	s.api = s.sup.start("http server", func(context.Context) error {
		if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	s.ha.start()
	return s, nil
}

// Shutdown stops taking work, lets the in-process workers finish their
// running steps, then stops the HTTP server and the orchestrator and closes
// the storage (a leading replica then gives its lease up, so another
// leads within a renew interval). It returns the failure of the component
// that stopped the server, if one did, with any error of stopping.
func (s *Server) Shutdown() error {
	s.ready.stop()
	var leaseErr error
	if s.ha != nil {
		leaseErr = s.ha.stop()
		s.watcher.stop()
	} else {
		t := s.currentTerm()
		t.stopWork(nil)
		s.watcher.stop()
		// Stopping the orchestrator ends the remote workers' long-polls at
		// once, so the HTTP server has no request left to wait for.
		t.orchestrator.stop()
	}
	s.auditHeads.stop() // after the last commit: the head logged is the last
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.api.cancel() // asked to stop: Serve's return is no failure
	httpErr := s.http.Shutdown(ctx)
	s.api.stop()
	failed := s.sup.wait()
	// Uploads started by the last finished jobs go out before the logs close.
	archiveErr := s.drainArchive()
	return errors.Join(failed, httpErr, leaseErr, archiveErr, s.storage.Close())
}

// eventSourceCount is how many event sources the loaded workspaces have:
// the in-process slots their consumers get. Without any at start-up there
// is no consumer pool, and a source a reload adds later runs in a job slot
// (as one added beyond the count waits for a consumer slot).
func eventSourceCount(registry *workspace.Registry) int {
	n := 0
	for _, st := range registry.List() {
		if st.Workspace == nil {
			continue
		}
		for _, tr := range st.Workspace.Triggers {
			if tr.Type == workflow.TriggerEventSource {
				n++
			}
		}
	}
	return n
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "appliance"
	}
	return h
}
