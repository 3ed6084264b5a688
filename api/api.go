// Package api serves the HTTP interface: the public /api endpoints, the
// worker protocol under /worker, webhooks under /hooks, and the live log
// stream over WebSocket.
// It opens no database: it must not import store, app or runners.
package api

import (
	"context"
	"github.com/appliance-sh/appliance/audit"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/appliance-sh/appliance/accounts"
	"github.com/appliance-sh/appliance/api/auth"
	"github.com/appliance-sh/appliance/api/dispatch"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

// Orchestrator is the part of the engine the API drives; *engine.Engine
// implements it.
type Orchestrator interface {
	CreateJob(ctx context.Context, req engine.CreateJob) (*engine.Job, error)
	CancelJob(ctx context.Context, jobID string) error
	Approve(ctx context.Context, jobID, step string, a engine.Approval) error
	Job(ctx context.Context, id string) (*engine.Job, []*engine.Step, error)
	SecretsOf(j *engine.Job, steps []*engine.Step) ([]string, error)
	SecretValues(ctx context.Context, jobID string) ([]string, error)
	Jobs(ctx context.Context, f engine.JobFilter) ([]*engine.Job, int, error)
	// JobRecord, StepSummary, StepsPage and HasStep serve a big job's
	// detail, steps and step logs without reading every step record.
	JobRecord(ctx context.Context, id string) (*engine.Job, error)
	StepSummary(ctx context.Context, jobID string) (map[string]int, error)
	StepsPage(ctx context.Context, jobID string, q engine.StepQuery) ([]*engine.Step, error)
	HasStep(ctx context.Context, jobID, name string) (bool, error)
	JobDone(ctx context.Context, jobID string) (<-chan struct{}, error)
	// SubscribeFeed streams committed job creations and status changes
	// (GET /api/events).
	SubscribeFeed(buffer int) *engine.FeedSubscription
	// SubscribeJobFeed follows one job: its job and step events.
	SubscribeJobFeed(jobID string, buffer int) *engine.FeedSubscription
	// dispatch.Engine serves the worker protocol; its AppendLog is how
	// lines reach a job's log, the job's secrets masked: the engine owns
	// masking, so the API never writes the log store itself.
	dispatch.Engine

	Workers(ctx context.Context, limit, offset int) ([]*engine.Worker, int, error)
	// WorkerFor is a worker with its recent steps and their total, as a
	// caller who sees only the jobs visible accepts (nil: all) knows it.
	WorkerFor(ctx context.Context, id string, visible func(workspace, task string) bool) (*engine.Worker, []*engine.WorkerStep, int, error)
	// Queues lists the queues and task limits in use; SetPriority moves a
	// queued job in line.
	Queues(ctx context.Context) ([]engine.QueueView, error)
	SetPriority(ctx context.Context, jobID string, priority int) (*engine.Job, error)
}

// EventSources is the event sources' supervisor; *eventsources.Supervisor
// implements it.
type EventSources interface {
	Status(ws, trigger string) (engine.ConsumerStatus, bool)
	// Running reports whether the supervisor runs (an enabled event source
	// it does not know yet is then starting).
	Running() bool
}

// Workspaces is the workspace registry; *workspace.Registry implements it.
type Workspaces interface {
	List() []workspace.Status
	Current(name string) (*workflow.Workspace, bool)
	Revision(name, revision string) (*workflow.Workspace, bool)
}

// LogStore holds job logs; *store.Logs implements it. The API only reads
// it: lines are written through the engine (Orchestrator.AppendLog).
type LogStore interface {
	// ReadLog writes the lines q selects to w as it reads them.
	ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error)
	// Subscribe starts a live view with the part of the log q selects.
	Subscribe(jobID string, q engine.LogQuery) (backfill io.ReadCloser, updates <-chan []byte, cancel func(), err error)
}

// Config wires the API.
type Config struct {
	Engine     Orchestrator
	Workspaces Workspaces
	Logs       LogStore
	// EventSources tells the consumers' state in the triggers list (nil =
	// none shown).
	EventSources EventSources
	// Auth turns authentication on (nil = off: no tokens needed, and the
	// /api/auth endpoints are 404). Users must then be set.
	Auth  *auth.Config
	Users auth.UserStore
	// Audit serves GET /api/audit (nil: 404). AuditQueue takes the entries
	// of denied requests, for the next commit (nil: none recorded);
	// OnDenied counts them by route for /metrics.
	Audit      AuditLog
	AuditQueue *audit.Queue
	OnDenied   func(route string)
	// OnClaimed hears of each claim of several (POST /worker/claims) that
	// handed a worker steps, and how long it took from its arrival to its
	// answer, for /metrics (nil: nobody hears).
	OnClaimed func(took time.Duration)
	// ACL limits what each user may see and do per task (nil = no limits;
	// it needs Auth). See acl.go.
	ACL *accounts.ACL
	// WorkerToken is the shared bearer token of the worker endpoints; when
	// empty they refuse every request.
	WorkerToken string
	Version     string
	Logger      *slog.Logger // nil = slog.Default()
	// ClaimWaitMax caps a worker's claim long-poll (default 30s).
	ClaimWaitMax time.Duration
	// StreamWriteTimeout is how long one log stream frame may wait for a
	// viewer that stopped reading before the viewer is disconnected
	// (default 10s).
	StreamWriteTimeout time.Duration
	// EventsPing is how often an idle GET /api/events stream sends a
	// comment (default 20s).
	EventsPing time.Duration
	// StreamRecheck is how often an open stream (events, log) re-checks
	// its caller's credential and access besides at once on a revocation
	// the API makes (default 30s): it catches what changes behind the
	// API's back, such as a login's last refresh token expiring.
	StreamRecheck time.Duration
	// Now is the clock for trigger next_runs and log timestamps (nil = time.Now).
	Now func() time.Time
	// UI serves every GET outside /api, /worker, /hooks and the operator
	// endpoints (nil = no UI).
	UI http.Handler

	// Health is /healthz's check: nil error = healthy (nil = always).
	Health func(ctx context.Context) error
	// Ready is /readyz's check: nil error once start-up has finished and
	// until shutdown begins (nil = always ready).
	Ready func(ctx context.Context) error
	// Metrics serves /metrics (nil = no such route).
	Metrics http.Handler
	// MetricsToken is a bearer token that may read /metrics with auth on,
	// besides any user's token or API key (empty = none).
	MetricsToken string

	// ListenAddr is the address the server listens on; /api accepts it as
	// Host besides loopback names (see guard.go).
	ListenAddr string
	// AllowedHosts are further Host values /api accepts (a reverse proxy's
	// public name), with or without a port.
	AllowedHosts []string
	// AllowedOrigins are origins (scheme://host[:port]) whose pages may
	// call /api besides the server's own.
	AllowedOrigins []string
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header names the client (auth.ClientAddr); from any other
	// peer those headers are ignored.
	TrustedProxies []netip.Prefix
	// MaxRequestBody bounds a request body (default 10 MiB; 413 beyond).
	MaxRequestBody int64
	// MaxWorkspace bounds the files of one workspace tarball for remote
	// workers (default 1 GiB; the download answers 409 beyond).
	MaxWorkspace int64
	// Snapshots, if set, opens a revision's saved tarball (os.ErrNotExist
	// when there is none): the download serves every revision a live job
	// still runs on from there, not only those the registry still holds.
	Snapshots func(workspace, revision string) (io.ReadCloser, error)
	// MaxHeaderBytes bounds the request line and headers (default 64 KiB;
	// 431 beyond).
	MaxHeaderBytes int
	// BodyReadTimeout is how long a request body may take to arrive
	// (default 60s).
	BodyReadTimeout time.Duration
	// StepTokens mints and checks step-bound workspace tokens (default a
	// fresh one; the in-process pool shares the server's).
	StepTokens *StepTokens
	// Workers serves the worker protocol (default one over Engine with
	// StepTokens; the in-process pool shares the server's).
	Workers *dispatch.Service
	// HA, set with two replicas on one database, forwards to the leader
	// while this replica follows (ha.go).
	HA *HA
}

// server holds the handlers' dependencies.
type server struct {
	cfg      Config
	log      *slog.Logger
	tarballs *tarballCache
	auth     *auth.Service // nil when auth is off
	guard    *browserGuard
	// workers serves the worker endpoints' reports.
	workers *dispatch.Service
	// stepTokens mints the step-bound workspace tokens of pods.
	stepTokens *StepTokens
	// echo routes the API; MCP tools call its handlers (mcpcall.go).
	echo *echo.Echo
	// mcp holds what every /mcp request shares (mcp.go).
	mcp *mcpShared
}

// New returns the HTTP handler of the API. The caller may add routes (the
// UI, webhooks) to the returned echo instance.
func New(cfg Config) *echo.Echo {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ClaimWaitMax <= 0 {
		cfg.ClaimWaitMax = 30 * time.Second
	}
	if cfg.StreamWriteTimeout <= 0 {
		cfg.StreamWriteTimeout = 10 * time.Second
	}
	if cfg.EventsPing <= 0 {
		cfg.EventsPing = 20 * time.Second
	}
	if cfg.StreamRecheck <= 0 {
		cfg.StreamRecheck = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRequestBody <= 0 {
		cfg.MaxRequestBody = 10 << 20
	}
	if cfg.MaxWorkspace <= 0 {
		cfg.MaxWorkspace = 1 << 30
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 64 << 10
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = 60 * time.Second
	}
	if cfg.StepTokens == nil {
		cfg.StepTokens = NewStepTokens(0, cfg.Now)
	}
	if cfg.Workers == nil {
		cfg.Workers = dispatch.New(cfg.Engine, dispatch.Config{Now: cfg.Now, MintStepToken: cfg.StepTokens.MintFor(cfg.Engine)})
	}
	s := &server{cfg: cfg, log: cfg.Logger, stepTokens: cfg.StepTokens, tarballs: newTarballCache(tarballsKept), workers: cfg.Workers,
		guard: newBrowserGuard(cfg.ListenAddr, cfg.AllowedHosts, cfg.AllowedOrigins)}
	if cfg.Auth != nil {
		if cfg.Auth.Audit == nil {
			cfg.Auth.Audit = cfg.AuditQueue // failed sign-ins wait with the denied requests
		}
		s.auth = auth.New(cfg.Auth, cfg.Users, cfg.Logger)
		// base_url names the server as its users reach it.
		s.guard.baseURL = func() string { return cfg.Auth.BaseURL }
	}

	e := echo.New()
	s.echo = e
	s.mcp = newMCPShared()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	// c.RealIP() is the client's address wherever it is asked for.
	// Behind a follower, it is the address the follower passes (ha.go).
	e.IPExtractor = s.clientAddr()
	e.Use(s.recoverPanics, s.limitHeaders, s.guardBrowsers, s.limitBody, s.bodyDeadline, s.forwardToLeader, s.authenticate)

	s.opsRoutes(e)

	a := e.Group("/api")
	a.GET("/config", s.getConfig)
	a.GET("/openapi.json", s.getOpenAPI)
	a.GET("/workspaces", s.listWorkspaces)
	a.GET("/workspaces/:ws/tasks", s.listTasks)
	a.GET("/workspaces/:ws/tasks/:name", s.getTask)
	a.POST("/workspaces/:ws/tasks/:name/execute", s.executeTask)
	a.GET("/workspaces/:ws/triggers", s.listTriggers)
	a.GET("/jobs", s.listJobs)
	a.GET("/jobs/:id", s.getJob)
	a.GET("/jobs/:id/steps", s.listSteps)
	a.POST("/jobs/:id/cancel", s.cancelJob)
	a.POST("/jobs/:id/rerun", s.rerunJob)
	a.POST("/jobs/:id/priority", s.setPriority)
	a.GET("/queues", s.listQueues)
	a.POST("/jobs/:id/steps/:step/approve", s.approveStep)
	a.GET("/jobs/:id/logs", s.jobLogs)
	a.GET("/jobs/:id/steps/:step/logs", s.stepLogs)
	a.GET("/jobs/:id/logs/stream", s.streamLogs)
	a.GET("/events", s.streamFeed)
	a.GET("/workers", s.listWorkers)
	a.GET("/workers/:id", s.getWorker)
	a.GET("/audit", s.listAudit)

	w := e.Group("/worker", s.requireWorkerToken)
	w.POST("/register", s.registerWorker)
	w.POST("/heartbeat", s.heartbeat)
	w.POST("/jobs", s.createLocalJob)
	w.POST("/jobs/claim", s.claim)
	w.POST("/claims", s.claimSteps)
	w.POST("/reports", s.reports)
	w.POST("/jobs/:id/steps/:step/start", s.startStep)
	w.POST("/jobs/:id/steps/:step/complete", s.completeStep)
	w.POST("/jobs/:id/logs", s.pushLogs)
	w.GET("/jobs/:id/cancelled", s.waitCancelled)
	w.POST("/jobs/:id/complete", s.completeJob)
	w.POST("/jobs/:id/steps/:step/workspace-token", s.mintStepToken)
	// The download also takes a step-bound token (a pod's init container).
	e.GET("/worker/workspace/:file", s.workspaceTarball, s.requireTarballToken)

	e.POST(mcpRoute, s.serveMCP)

	s.webhookRoutes(e)
	if s.auth != nil {
		s.auth.Routes(a)
	}
	s.uiRoutes(e)
	return e
}

func (s *server) getConfig(c echo.Context) error {
	resp := wire.Config{OIDCProviders: []wire.OIDCProvider{}, Version: s.cfg.Version}
	if s.auth != nil {
		resp.AuthRequired = true
		resp.ACLEnabled = s.cfg.ACL != nil
		resp.HasInternalAuth = s.auth.HasInternal()
		resp.OIDCProviders = s.auth.OIDCLogins()
	}
	resp.HA = s.haStatus()
	return c.JSON(http.StatusOK, resp)
}
