// Package dispatch is the server's side of the worker protocol, over the
// engine and free of any transport: one Service whose calls both
// transports make, the HTTP handlers in api for remote workers and the
// direct adapter in app for the in-process pool, so both answer and refuse
// alike.
// It must not import net/http, echo or api (api imports it), store, app or
// runners.
package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
)

// Engine is what the service needs of the orchestrator; *engine.Engine
// implements it.
type Engine interface {
	Emitter
	RegisterWorker(ctx context.Context, name string, tags []string, inProcess bool, secretSHA256 string) (string, error)
	// WorkerCredential and StepHolder read the engine's holder index,
	// without a turn of its loop: every report is checked against them.
	WorkerCredential(workerID string) (engine.WorkerCredential, bool)
	StepHolder(jobID, step string) string
	Heartbeat(ctx context.Context, workerID string, running []engine.StepRef) error
	Claim(ctx context.Context, workerID string, wait time.Duration) (*engine.Claim, error)
	ClaimKind(ctx context.Context, workerID string, wait time.Duration, kind engine.StepKind) (*engine.Claim, error)
	ClaimSteps(ctx context.Context, workerID string, wait time.Duration, max int) ([]*engine.Claim, error)
	ClaimStepsReporting(ctx context.Context, workerID string, results []engine.StepReport, max int) ([]error, []*engine.Claim, error)
	// Local execution mode (engine/local.go).
	CreateLocalJob(ctx context.Context, workerID string, req engine.CreateJob) (*engine.Job, error)
	ClaimJob(ctx context.Context, workerID, jobID string, wait time.Duration) (*engine.Claim, error)
	CompleteJob(ctx context.Context, workerID, jobID string) (*engine.Job, error)
	StartStep(ctx context.Context, workerID, jobID, step string) error
	StartStepApplied(ctx context.Context, workerID, jobID, step string) error
	CompleteStep(ctx context.Context, workerID, jobID, step string, res engine.StepResult) error
	CompleteStepApplied(ctx context.Context, workerID, jobID, step string, res engine.StepResult) error
	HandBackStep(ctx context.Context, workerID, jobID, step, reason string) error
	CheckHolder(ctx context.Context, workerID, jobID, step string) error
	WaitCancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error)
	OnCancelled(ctx context.Context, jobID string, f func()) (stop func() bool, err error)
	// AppendRunLog writes the lines a run of a step pushed to the job's
	// log, the job's secrets masked, numbered lines only once.
	AppendRunLog(jobID, step, run string, lines []engine.LogLine) error
}

// MintFunc mints a step-bound workspace token for a step workerID holds
// running, with its expiry.
type MintFunc func(ctx context.Context, workerID, jobID, step string) (string, time.Time, error)

// Config adjusts a Service.
type Config struct {
	// Now stamps pushed lines that have no timestamp (nil = time.Now).
	Now func() time.Time
	// EventWait bounds how long a log push waits for room among an event
	// source's max_in_flight jobs before it is refused with ErrBusy
	// (default 20s, inside a remote worker's 30s request timeout).
	EventWait time.Duration
	// MintStepToken mints pods' workspace tokens (nil = none can be minted).
	MintStepToken MintFunc
	// InterfaceProtocol (worker_protocol: interface) serves workers that
	// send the interface's bodies to the letter: they may register without
	// a secret, and push logs and complete a running step without naming
	// a worker (the step's holder is meant). Weaker: any holder of the
	// worker token may then report as such a worker.
	InterfaceProtocol bool
}

// Service is the worker protocol's one implementation.
type Service struct {
	eng Engine
	cfg Config
}

// New returns the service over eng.
func New(eng Engine, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.EventWait <= 0 {
		cfg.EventWait = 20 * time.Second
	}
	return &Service{eng: eng, cfg: cfg}
}

// refusal gives an engine refusal the protocol's kind, keeping its
// message: the HTTP transport still maps it by the engine's sentinel.
func refusal(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrConflict):
		return workerproto.Refuse(workerproto.ErrConflict, err)
	case errors.Is(err, engine.ErrNotFound):
		return workerproto.Refuse(workerproto.ErrNotFound, err)
	case errors.Is(err, engine.ErrInvalid):
		return workerproto.Refuse(workerproto.ErrInvalid, err)
	}
	return err
}

// workerRefusal is refusal for the calls that name only their worker: a
// thing not found is the worker, which registers again.
func workerRefusal(err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return workerproto.Refuse(workerproto.ErrUnknownWorker, err)
	}
	return refusal(err)
}

// errNoSecret refuses a remote registration without a secret.
var errNoSecret = workerproto.Errorf(workerproto.ErrInvalid,
	"want_secret is required: a worker proves who it is with the secret it gets at registration "+
		"(appliance's worker asks for one); set worker_protocol: interface on the server to serve workers that send the interface's bodies only")

// Register records a worker. The in-process pool's workers never time
// out and need no secret; a remote worker gets one when it asks (and must
// ask, unless InterfaceProtocol).
func (s *Service) Register(ctx context.Context, who Caller, req workerproto.Register) (workerproto.Registered, error) {
	if err := req.Validate(); err != nil {
		return workerproto.Registered{}, err
	}
	if req.Tags == nil {
		req.Tags = []string{}
	}
	var secret, hash string
	switch {
	case who.inProcess:
	case req.WantSecret:
		secret, hash = newSecret()
	case !s.cfg.InterfaceProtocol:
		return workerproto.Registered{}, errNoSecret
	}
	id, err := s.eng.RegisterWorker(ctx, req.Name, req.Tags, who.inProcess, hash)
	if err != nil {
		return workerproto.Registered{}, refusal(err)
	}
	return workerproto.Registered{WorkerID: id, Secret: secret}, nil
}

// Heartbeat marks the worker alive; ErrUnknownWorker when it is forgotten.
func (s *Service) Heartbeat(ctx context.Context, who Caller, req workerproto.Heartbeat) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return err
	}
	var running []engine.StepRef
	if req.Running != nil {
		running = make([]engine.StepRef, len(req.Running))
		for i, r := range req.Running {
			running[i] = engine.StepRef{JobID: r.JobID, Step: r.Step}
		}
	}
	return workerRefusal(s.eng.Heartbeat(ctx, req.WorkerID, running))
}

// Claim waits up to wait for a step the worker's registered tags reach;
// nil without error means no work. When ctx ends first (the worker hung
// up), the engine stops waiting and hands back a step it could not deliver.
func (s *Service) Claim(ctx context.Context, who Caller, req workerproto.Claim, wait time.Duration) (*workerproto.Assignment, error) {
	return s.ClaimKind(ctx, who, req, wait, engine.AllSteps)
}

// ClaimKind is Claim taking only ready steps of kind: the in-process pool
// keeps its slots for event sources' consumers apart from its job slots.
func (s *Service) ClaimKind(ctx context.Context, who Caller, req workerproto.Claim, wait time.Duration, kind engine.StepKind) (*workerproto.Assignment, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return nil, err
	}
	var (
		c   *engine.Claim
		err error
	)
	if req.JobID != "" {
		if err := workerproto.CheckJobID(req.JobID); err != nil {
			return nil, err
		}
		c, err = s.eng.ClaimJob(ctx, req.WorkerID, req.JobID, wait)
	} else {
		c, err = s.eng.ClaimKind(ctx, req.WorkerID, wait, kind)
	}
	if err != nil || c == nil {
		return nil, workerRefusal(err)
	}
	return assignmentOf(c), nil
}

// ClaimSteps waits up to wait for steps the worker's registered tags
// reach and hands it up to req.Max of them, once the claims are durable
// (see engine.ClaimSteps): the worker runs them at once. A claim carrying
// results (req.Results) records them first, in the same commit, and does
// not wait (see engine.ClaimStepsReporting); results holds each one's
// refusal, nil when taken, as its own complete would have had.
func (s *Service) ClaimSteps(ctx context.Context, who Caller, req workerproto.Claims, wait time.Duration) (out workerproto.Assignments, results []error, err error) {
	if err := req.Validate(); err != nil {
		return workerproto.Assignments{}, nil, err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return workerproto.Assignments{}, nil, err
	}
	var cs []*engine.Claim
	if len(req.Results) == 0 {
		cs, err = s.eng.ClaimSteps(ctx, req.WorkerID, wait, req.Max)
	} else {
		results = make([]error, len(req.Results))
		var reports []engine.StepReport
		var at []int // reports[k] is req.Results[at[k]]
		for i, r := range req.Results {
			if results[i] = s.checkResult(who, req.WorkerID, r); results[i] == nil {
				reports = append(reports, engine.StepReport{JobID: r.JobID, Step: r.StepName,
					Result: engine.StepResult{Output: r.Output, ExitCode: r.ExitCode, Error: r.Error}})
				at = append(at, i)
			}
		}
		var errs []error
		errs, cs, err = s.eng.ClaimStepsReporting(ctx, req.WorkerID, reports, req.Max)
		for k, e := range errs {
			results[at[k]] = refusal(e)
		}
	}
	if err != nil {
		return workerproto.Assignments{}, nil, workerRefusal(err)
	}
	out = workerproto.Assignments{Assignments: make([]workerproto.Assignment, len(cs))}
	for i, c := range cs {
		out.Assignments[i] = *assignmentOf(c)
	}
	return out, results, nil
}

// checkResult checks a result a claim carries, as its own complete would
// be checked: a claim's results are its worker's.
func (s *Service) checkResult(who Caller, workerID string, r workerproto.StepResult) error {
	if err := workerproto.CheckJobID(r.JobID); err != nil {
		return err
	}
	if r.StepName == "" {
		return workerproto.Errorf(workerproto.ErrInvalid, "step_name is required")
	}
	if r.WorkerID == "" {
		r.WorkerID = workerID
	}
	if r.WorkerID != workerID {
		return workerproto.Errorf(workerproto.ErrInvalid, "worker_id %q: a claim carries only its own worker's results", r.WorkerID)
	}
	return r.Result.Validate()
}

// CreateLocalJob creates a job the worker holds whole and runs itself
// (local execution mode): its steps are offered to that worker only.
func (s *Service) CreateLocalJob(ctx context.Context, who Caller, req workerproto.LocalJob) (workerproto.LocalJobCreated, error) {
	if err := req.Validate(); err != nil {
		return workerproto.LocalJobCreated{}, err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return workerproto.LocalJobCreated{}, err
	}
	input := req.Input
	if input == nil {
		input = map[string]any{}
	}
	job, err := s.eng.CreateLocalJob(ctx, req.WorkerID, engine.CreateJob{
		Workspace: req.Workspace,
		Task:      req.Task,
		Input:     input,
		Strict:    true, // typed by a person on the command line
	})
	if err != nil {
		return workerproto.LocalJobCreated{}, workerRefusal(err)
	}
	return workerproto.LocalJobCreated{JobID: job.ID, Revision: job.Revision}, nil
}

// CompleteJob ends a local job its holder has run.
func (s *Service) CompleteJob(ctx context.Context, who Caller, jobID string, req workerproto.JobDone) (workerproto.JobCompleted, error) {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return workerproto.JobCompleted{}, err
	}
	if err := req.Validate(); err != nil {
		return workerproto.JobCompleted{}, err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return workerproto.JobCompleted{}, err
	}
	job, err := s.eng.CompleteJob(ctx, req.WorkerID, jobID)
	if err != nil {
		return workerproto.JobCompleted{}, refusal(err)
	}
	return workerproto.JobCompleted{Status: "ok", JobStatus: job.Status}, nil
}

// Start records that the worker started a step it claimed.
func (s *Service) Start(ctx context.Context, who Caller, jobID, step string, req workerproto.WorkerRef) error {
	return s.start(who, jobID, req, func() error { return s.eng.StartStep(ctx, req.WorkerID, jobID, step) })
}

// StartInProcess is Start for the in-process workers, answered once the
// engine has applied the start rather than once it is durable: the same
// checks and refusals, without waiting for an fsync before the step runs
// (see engine.StartStepApplied). Their steps cannot outlive the server,
// so a start a crash loses cannot leave a step running twice.
func (s *Service) StartInProcess(ctx context.Context, jobID, step string, req workerproto.WorkerRef) error {
	return s.start(InProcess, jobID, req, func() error { return s.eng.StartStepApplied(ctx, req.WorkerID, jobID, step) })
}

// start checks a start report, then records it with record.
func (s *Service) start(who Caller, jobID string, req workerproto.WorkerRef, record func() error) error {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return err
	}
	return refusal(record())
}

// Complete records the result of a step the worker holds.
func (s *Service) Complete(ctx context.Context, who Caller, jobID, step string, req workerproto.Result) error {
	return s.complete(who, jobID, step, req, func(workerID string, res engine.StepResult) error {
		return s.eng.CompleteStep(ctx, workerID, jobID, step, res)
	})
}

// CompleteInProcess is Complete for the in-process workers, answered once
// the engine has applied the result (see StartInProcess and
// engine.CompleteStepApplied): the worker claims its next step without
// waiting for an fsync.
func (s *Service) CompleteInProcess(ctx context.Context, jobID, step string, req workerproto.Result) error {
	return s.complete(InProcess, jobID, step, req, func(workerID string, res engine.StepResult) error {
		return s.eng.CompleteStepApplied(ctx, workerID, jobID, step, res)
	})
}

// HandBackInProcess gives back a step an in-process worker stopped at
// the drain deadline of a graceful stop: it is ready again and runs from
// the start, at the latest at the server's next start (see
// engine.HandBackStep). Only the in-process transport offers it: a
// remote worker's step cut by its drain is a failed attempt, as a step
// that stops when its worker does.
func (s *Service) HandBackInProcess(ctx context.Context, jobID, step, reason string, req workerproto.WorkerRef) error {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	return refusal(s.eng.HandBackStep(ctx, req.WorkerID, jobID, step, reason))
}

// complete checks a result report, then records it with record.
func (s *Service) complete(who Caller, jobID, step string, req workerproto.Result, record func(string, engine.StepResult) error) error {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return err
	}
	var err error
	if req.WorkerID, err = s.reporter(who, jobID, step, req.WorkerID); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	return refusal(record(req.WorkerID, engine.StepResult{Output: req.Output, ExitCode: req.ExitCode, Error: req.Error}))
}

// errEventsBusy ends a push that waited EventWait for an event source's
// room.
var errEventsBusy = workerproto.Errorf(workerproto.ErrBusy, "the event source's max_in_flight target jobs are still running: push again")

// PushLogs appends the lines of a step the worker holds to the job's log
// (those of a numbered run only once) and tells whether the job was
// cancelled. An event source's `OUTPUT: ` lines become events first.
func (s *Service) PushLogs(ctx context.Context, who Caller, jobID string, req workerproto.LogPush) (workerproto.Pushed, error) {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return workerproto.Pushed{}, err
	}
	if req.StepName != "" { // without it, Validate says so
		var err error
		if req.WorkerID, err = s.reporter(who, jobID, req.StepName, req.WorkerID); err != nil {
			return workerproto.Pushed{}, err
		}
	}
	if err := req.Validate(); err != nil {
		return workerproto.Pushed{}, err
	}
	// Workers write only the lines of steps they hold (so never `_server`,
	// the orchestrator's voice); the check reads the engine's holder index
	// without a turn of its loop.
	if err := s.eng.CheckHolder(ctx, req.WorkerID, jobID, req.StepName); err != nil {
		return workerproto.Pushed{}, refusal(err)
	}
	// An event source's consumer may have to wait for room among its
	// trigger's max_in_flight jobs: the wait stays well inside a remote
	// worker's request timeout, and ErrBusy makes it push again.
	pushCtx, cancel := context.WithTimeoutCause(ctx, s.cfg.EventWait, errEventsBusy)
	defer cancel()
	err := deliverPush(pushCtx, s.eng, jobID, req, func(lines []workerproto.LogLine) error {
		// The engine masks the job's secrets on the way in; the log skips
		// the numbered lines it has, even those a server killed before
		// answering appended.
		return s.eng.AppendRunLog(jobID, req.StepName, req.Run, logLinesAt(req.StepName, lines, s.cfg.Now()))
	})
	if err != nil {
		return workerproto.Pushed{}, refusal(err)
	}
	cancelled, err := s.eng.WaitCancelled(ctx, jobID, 0)
	if err != nil {
		return workerproto.Pushed{}, refusal(err)
	}
	return workerproto.Pushed{Status: "ok", Cancelled: cancelled}, nil
}

// Cancelled waits up to wait until the job is cancelled.
func (s *Service) Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return false, err
	}
	cancelled, err := s.eng.WaitCancelled(ctx, jobID, wait)
	return cancelled, refusal(err)
}

// OnCancelled has f called if the job is cancelled, until stop: the
// in-process transport's push in place of the Cancelled long-poll.
func (s *Service) OnCancelled(ctx context.Context, jobID string, f func()) (stop func() bool, err error) {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return nil, err
	}
	stop, err = s.eng.OnCancelled(ctx, jobID, f)
	return stop, refusal(err)
}

// errNoStepTokens answers a token request on a server that mints none.
var errNoStepTokens = errors.New("this server mints no workspace tokens")

// StepToken mints a token bound to a step the worker holds running.
func (s *Service) StepToken(ctx context.Context, who Caller, jobID, step string, req workerproto.WorkerRef) (workerproto.StepToken, error) {
	if err := workerproto.CheckJobID(jobID); err != nil {
		return workerproto.StepToken{}, err
	}
	if err := req.Validate(); err != nil {
		return workerproto.StepToken{}, err
	}
	if err := s.prove(who, req.WorkerID); err != nil {
		return workerproto.StepToken{}, err
	}
	if s.cfg.MintStepToken == nil {
		return workerproto.StepToken{}, errNoStepTokens
	}
	tok, exp, err := s.cfg.MintStepToken(ctx, req.WorkerID, jobID, step)
	if err != nil {
		return workerproto.StepToken{}, refusal(err)
	}
	return workerproto.StepToken{Token: tok, ExpiresAt: exp}, nil
}
