package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/schedule"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
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
	cfg, err := loadServerConfig(configPath(*configFlag))
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
		cfg.Workspaces = map[string]WorkspaceConfig{workspaceName(*workspace): {Type: "folder", Path: *workspace}}
	}
	if *workers >= 0 {
		cfg.Workers = workers
	}
	if *insecure {
		cfg.InsecureNoAuth = true
	}
	if err := cfg.checkExposure(); err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 2
	}

	tuneRuntime()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := startServer(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "appliance serve:", err)
		return 1
	}
	printSettings(stdout, cfg, srv.Addr(), srv.workerTags)
	<-ctx.Done()
	log.Info("shutting down")
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

func tuneRuntime() {
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

func printSettings(w io.Writer, cfg *ServerConfig, addr string, workerTags []string) {
	fmt.Fprintf(w, "appliance %s serving on http://%s\n", Version, addr)
	fmt.Fprintf(w, "  data_dir:              %s\n", cfg.DataDir)
	fmt.Fprintf(w, "  log_storage.local_dir: %s\n", cfg.LogStorage.LocalDir)
	fmt.Fprintf(w, "  log_storage.archive:   %s\n", cfg.LogStorage.describeArchive())
	names := make([]string, 0, len(cfg.Workspaces))
	for name := range cfg.Workspaces {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  workspace %-12s %s\n", name+":", cfg.Workspaces[name].Path)
	}
	fmt.Fprintf(w, "  workers (in-process):  %d, tags %v\n", *cfg.Workers, workerTags)
	token := "not set (remote workers cannot join)"
	if cfg.WorkerToken != "" {
		token = "set"
	}
	fmt.Fprintf(w, "  worker_token:          %s\n", token)
	fmt.Fprintf(w, "  heartbeat_timeout:     %s\n", cfg.heartbeatTimeout)
	fmt.Fprintf(w, "  drain_timeout:         %s\n", cfg.drainTimeout)
	fmt.Fprintf(w, "  auth:                  %s\n", cfg.Auth.describe())
	if len(cfg.AllowedHosts) > 0 {
		fmt.Fprintf(w, "  allowed_hosts:         %s\n", strings.Join(cfg.AllowedHosts, ", "))
	}
	if len(cfg.AllowedOrigins) > 0 {
		fmt.Fprintf(w, "  allowed_origins:       %s\n", strings.Join(cfg.AllowedOrigins, ", "))
	}
	if cfg.exposedWithoutAuth() {
		fmt.Fprintf(w, "  insecure_no_auth:      true (WARNING: auth is off on a network address; anyone who reaches it can run code)\n")
	}
}

// Server is a running appliance server.
type Server struct {
	cfg      *ServerConfig
	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	db       *store.DB
	logs     *store.Logs
	archive  *store.ArchivingLogs // nil unless log_storage archives logs
	engine   *engine.Engine
	// workerTags are the in-process workers' tags: worker_tags plus the
	// runner capabilities found (docker).
	workerTags []string

	cancelEngine    context.CancelFunc
	cancelWorkers   context.CancelFunc
	cancelWatch     context.CancelFunc
	cancelScheduler context.CancelFunc
	engineDone      chan error
	schedulerDone   chan struct{}
	workersDone     chan struct{}
	background      sync.WaitGroup
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// startServer opens the storage, loads the workspaces and starts the
// orchestrator, the scheduler, the HTTP server and the in-process workers.
func startServer(ctx context.Context, cfg *ServerConfig, log *slog.Logger) (_ *Server, err error) {
	// What is open so far, closed in reverse order if start-up fails.
	var opened []func() error
	defer func() {
		if err != nil {
			for i := len(opened) - 1; i >= 0; i-- {
				_ = opened[i]()
			}
		}
	}()

	pool := runners.WorkerConfig{
		Name:          hostname() + "-inprocess",
		Tags:          cfg.WorkerTags,
		MaxConcurrent: *cfg.Workers,
		DrainTimeout:  cfg.drainTimeout,
		LogBuffer:     cfg.logBuffer,
	}
	if *cfg.Workers > 0 {
		if err := detectRunners(ctx, cfg.Docker, &pool, log.With("worker", "in-process")); err != nil {
			return nil, err
		}
	}
	dirs := map[string]string{}
	for name, ws := range cfg.Workspaces {
		dirs[name] = ws.Path
	}
	registry, err := workflow.NewRegistry(dirs, nil, log)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(cfg.dbPath())
	if err != nil {
		return nil, err
	}
	opened = append(opened, db.Close)
	logs, err := store.OpenLogs(cfg.LogStorage.LocalDir)
	if err != nil {
		return nil, err
	}
	opened = append(opened, logs.Close)
	logs.SetLimits(store.LogLimits{StepLog: cfg.limits.StepLog, LogLine: cfg.limits.LogLine})
	jobLogs, archive, err := openArchive(cfg.LogStorage, logs, db, log)
	if err != nil {
		return nil, err
	}
	if archive != nil {
		opened = append(opened, archive.Close)
	}
	if created, err := seedInitialUser(ctx, db, cfg.Auth, time.Now()); err != nil {
		return nil, err
	} else if created {
		log.Info("created the initial admin user", "email", cfg.Auth.InitialUser.Email)
	}
	masked := &maskingLogs{serverLogs: jobLogs}
	eng, err := engine.New(engine.Config{
		Store:            db,
		Workspaces:       registry,
		Logs:             masked,
		Logger:           log,
		HeartbeatTimeout: cfg.heartbeatTimeout,
		TemplateTime:     cfg.limits.TemplateTime,
		TemplateOutput:   cfg.limits.TemplateOutput,
	})
	if err != nil {
		return nil, err
	}
	masked.secrets = eng
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if cfg.exposedWithoutAuth() {
		log.Warn("auth is off and the server listens on a network address (insecure_no_auth): anyone who can reach "+
			ln.Addr().String()+" can run code on this machine; turn auth on or listen on 127.0.0.1", "listen", cfg.Listen)
	}

	s := &Server{cfg: cfg, log: log, listener: ln, db: db, logs: logs, archive: archive, engine: eng,
		workerTags: pool.Tags, engineDone: make(chan error, 1), workersDone: make(chan struct{})}
	engineCtx, cancelEngine := context.WithCancel(context.Background())
	s.cancelEngine = cancelEngine
	go func() { s.engineDone <- eng.Run(engineCtx) }()

	schedulerCtx, cancelScheduler := context.WithCancel(context.Background())
	s.cancelScheduler, s.schedulerDone = cancelScheduler, make(chan struct{})
	sched := schedule.New(schedule.Config{Workspaces: registry, Jobs: eng, State: db, Clock: schedule.RealClock{}, Logger: log.With("component", "scheduler")})
	go func() {
		defer close(s.schedulerDone)
		if err := sched.Run(schedulerCtx); err != nil {
			log.Error("scheduler stopped; triggers will not fire", "err", err)
		}
	}()

	watchCtx, cancelWatch := context.WithCancel(context.Background())
	s.cancelWatch = cancelWatch
	s.goBackground(func() {
		if err := registry.Watch(watchCtx); err != nil {
			log.Error("workspace hot reload is off", "err", err)
		}
	})

	s.http = &http.Server{
		Handler: api.New(api.Config{
			Engine:      eng,
			Workspaces:  registry,
			Logs:        masked,
			WorkerToken: cfg.WorkerToken,
			Version:     Version,
			Logger:      log,
			UI:          ui.Handler(),
			Auth:        cfg.Auth.apiConfig(cfg.limits),
			Users:       db,

			ListenAddr:      cfg.Listen,
			AllowedHosts:    cfg.AllowedHosts,
			AllowedOrigins:  cfg.AllowedOrigins,
			MaxRequestBody:  cfg.limits.RequestBody,
			MaxWorkspace:    cfg.limits.WorkspaceSize,
			MaxHeaderBytes:  maxHeaderBytes,
			BodyReadTimeout: bodyReadTimeout,
		}),
		// No ReadTimeout: its deadline would end long-polls and outlive a
		// WebSocket hijack; the api bounds each request body instead.
		ReadHeaderTimeout: cfg.headerTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    netHTTPMaxHeaderBytes,
	}
	s.goBackground(func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "err", err)
		}
	})

	workersCtx, cancelWorkers := context.WithCancel(context.Background())
	s.cancelWorkers = cancelWorkers
	if *cfg.Workers > 0 {
		workers := runners.NewWorker(newInProcessServer(eng, masked, registry), pool, log.With("worker", "in-process"))
		go func() {
			defer close(s.workersDone)
			if err := workers.Run(workersCtx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("in-process workers stopped", "err", err)
			}
		}()
	} else {
		close(s.workersDone)
	}
	return s, nil
}

func (s *Server) goBackground(f func()) {
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		f()
	}()
}

// Shutdown stops taking work, lets the in-process workers finish their
// running steps, then stops the HTTP server and the orchestrator and closes
// the storage.
func (s *Server) Shutdown() error {
	// Triggers stop first, so none fires into an orchestrator shutting down.
	s.cancelScheduler()
	<-s.schedulerDone
	s.cancelWorkers()
	s.cancelWatch()
	<-s.workersDone
	// Stopping the orchestrator ends the remote workers' long-polls at once,
	// so the HTTP server has no request left to wait for.
	s.cancelEngine()
	engineErr := <-s.engineDone
	if errors.Is(engineErr, context.Canceled) {
		engineErr = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	httpErr := s.http.Shutdown(ctx)
	s.background.Wait()
	// Uploads started by the last finished jobs go out before the logs close.
	archiveErr := s.drainArchive()
	return errors.Join(httpErr, engineErr, archiveErr, s.logs.Close(), s.db.Close())
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "appliance"
	}
	return h
}
