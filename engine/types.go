package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/audit"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// Job statuses.
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
	JobSkipped   = "skipped" // scheduler concurrency: skip
)

// Step statuses.
const (
	StepPending   = "pending"
	StepReady     = "ready"
	StepRunning   = "running"
	StepWaiting   = "waiting" // approval steps
	StepCompleted = "completed"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// Job source types.
const (
	SourceAPI     = "api"
	SourceUser    = "user"
	SourceTrigger = "trigger"
	SourceWebhook = "webhook"
	SourceHook    = "hook"
	SourceTask    = "task"
)

// Worker statuses.
const (
	WorkerActive   = "active"
	WorkerInactive = "inactive"
)

// ServerStep is the step name of server-side events in a job's log.
const ServerStep = "_server"

// Sentinel errors; api maps them to HTTP statuses in one place.
var (
	ErrNotFound = errors.New("not found")         // 404
	ErrConflict = errors.New("conflict")          // 409
	ErrInvalid  = errors.New("invalid input")     // 400
	ErrStopped  = errors.New("engine is stopped") // 503
	// ErrUnavailable is a store behind the engine that did not answer
	// (the log archive): a retry may succeed, so it is no server fault.
	ErrUnavailable = errors.New("unavailable") // 503
	// ErrNotLeader is a write refused because this replica does not lead
	// (it never did, or it lost the lease): the leader must make it.
	ErrNotLeader = errors.New("this replica is not the leader") // 503
	// ErrDatabaseUnavailable is the database that did not answer (it
	// restarts, a network cut): an ErrUnavailable the client is told of
	// as such, so it retries.
	ErrDatabaseUnavailable = fmt.Errorf("the database did not answer: %w", ErrUnavailable) // 503
)

// Job is one execution of a task. JSON tags are the interface's field names.
type Job struct {
	ID        string `json:"job_id"`
	Workspace string `json:"workspace"`
	TaskName  string `json:"task_name"`
	// AccessPath is what the ACL judges the job by, fixed when it is
	// created: its task's `folder/task` (or `task`) in the revision it was
	// created on, and for a hook job the AccessPath of the job that fired
	// it (its input is that job's data). Renaming, moving or removing the
	// task later changes nothing for who may see the job. Internal: the
	// API does not show it.
	AccessPath  string         `json:"access_path"`
	Mode        string         `json:"mode"`
	Status      string         `json:"status"`
	SourceType  string         `json:"source_type"`
	SourceID    *string        `json:"source_id"`
	Revision    string         `json:"revision"`
	Input       map[string]any `json:"input"`
	Output      map[string]any `json:"output"` // {sink_step: output}, once terminal
	ParentJobID string         `json:"parent_job_id,omitempty"`
	ParentStep  string         `json:"parent_step,omitempty"`
	Depth       int            `json:"depth,omitempty"` // child job nesting level, 0 for top-level jobs
	CreatedAt   time.Time      `json:"created_at"`
	StartedAt   *time.Time     `json:"started_at"`
	CompletedAt *time.Time     `json:"completed_at"`
	Deadline    *time.Time     `json:"deadline,omitempty"` // task timeout
	RerunOf     string         `json:"rerun_of,omitempty"` // the job this one re-runs
	// RerunFromFailed is set with RerunOf when the re-run reuses the
	// completed steps of RerunOf: a restart before a for_each step expands
	// needs it to reuse that step's completed instances. Internal.
	RerunFromFailed bool `json:"rerun_from_failed,omitempty"`
	// HooksPending is set, in the commit that ends the job, while its
	// hooks' inputs render off the loop, and cleared in the commit that
	// creates the hook jobs: a store keeps such a job among the active
	// ones, so a restart in between fires the hooks again. Internal: the
	// API does not show it.
	HooksPending bool `json:"hooks_pending,omitempty"`
	// IdempotencyKey is the key the request that made the job carried
	// (CreateJob.IdempotencyKey). Internal.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Queue is set on a job of a task with a concurrency limit or a queue
	// (see queues.go): the limits it needs, its priority, and whether it
	// is waiting for a slot. Stored with the job, so a restart rebuilds
	// the queues from the store.
	Queue *JobQueue `json:"queue,omitempty"`
}

// JobQueue is a job's place under its task's concurrency limit and its
// named queue. Stores keep it as part of the job's JSON.
type JobQueue struct {
	Name string `json:"name,omitempty"` // the server config queue the task joins
	// Keyed is set when the task has a concurrency limit; Key is its
	// rendered key ("" when the task gives none: one limit for the task).
	Keyed    bool   `json:"keyed,omitempty"`
	Key      string `json:"key,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// Waiting is set while the job waits for a slot (status pending),
	// since Since.
	Waiting bool       `json:"waiting,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	// Within names the limits an ancestor holds (or the job that fired
	// a hook job), which the job runs within: it needs no slot of them.
	Within []string `json:"within,omitempty"`
	// Slots names the limits the job needs a slot of, its task's and its
	// queue's less Within: waited for while Waiting, then held until it
	// ends. Derived, not stored (see Engine.slotsOf).
	Slots []string `json:"-"`
	// Position is the job's 1-based place in line while it waits,
	// filled in by Engine.Job and Engine.Jobs, never stored.
	Position int `json:"-"`
}

// Queued reports whether the job waits for a slot.
func (j *Job) Queued() bool { return j.Queue != nil && j.Queue.Waiting && !j.Terminal() }

// Terminal reports whether the job can no longer change.
func (j *Job) Terminal() bool { return JobTerminal(j.Status) }

// JobTerminal reports whether a job status is final.
func JobTerminal(status string) bool {
	switch status {
	case JobCompleted, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// Step is one step record of a job. A for_each step has one record of its
// own (aggregating) plus one per instance, named `<step>[<index>]`.
type Step struct {
	JobID        string         `json:"job_id"`
	Name         string         `json:"step_name"`
	FlowStep     string         `json:"flow_step"`              // the flow step this record belongs to
	DependsOn    []string       `json:"depends_on,omitempty"`   // a flow step's depends_on, as its job was created
	Index        int            `json:"index"`                  // for_each instance index, -1 otherwise
	Item         any            `json:"item,omitempty"`         // for_each instance item: `each.item` in its templates
	ChildJobID   string         `json:"child_job_id,omitempty"` // the job a task step runs
	Message      string         `json:"message,omitempty"`      // an approval step's rendered message
	Seq          int            `json:"seq"`                    // display order within the job
	ActionName   string         `json:"action_name"`            // for inline actions, the step name
	ActionType   string         `json:"action_type"`
	Runner       string         `json:"runner"` // local, docker, pod, or none (server-side)
	Input        map[string]any `json:"input"`  // resolved when the step becomes ready
	Output       any            `json:"output"` // object, aggregated array (for_each) or null
	Status       string         `json:"status"`
	WorkerID     *string        `json:"worker_id"`
	ReadyAt      *time.Time     `json:"ready_at,omitempty"`
	StartedAt    *time.Time     `json:"started_at"`
	CompletedAt  *time.Time     `json:"completed_at"`
	ErrorMessage *string        `json:"error_message"`
	RequiredTags []string       `json:"required_tags,omitempty"`
	Deadline     *time.Time     `json:"deadline,omitempty"` // step timeout, set when claimed (an agent step: when its call starts)
	// ReusedFrom is the job whose completed step this record took over in
	// a re-run from the failed steps: nothing ran in this job.
	ReusedFrom string `json:"reused_from,omitempty"`
	// Attempt is the step's attempt number, 1-based (0 in records written
	// before retries existed: read it through AttemptNumber). RetryAt is
	// set while a failed attempt waits to be retried (status pending).
	Attempt int        `json:"attempt,omitempty"`
	RetryAt *time.Time `json:"retry_at,omitempty"`
	// Unconfirmed: a claim of several started the step (see ClaimSteps)
	// and its worker has not said it has it yet (a report, or a heartbeat
	// naming it): lost on the way, it is put back, as an unstarted one.
	// Stored, so that a claim whose answer a crash cut off is put back
	// after the restart too. An in-process claim starts its step the same
	// way; its confirmation is not stored, since a restart fails the
	// in-process workers' steps whatever their records say.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
}

// AttemptNumber is the step's attempt, 1-based.
func (s *Step) AttemptNumber() int {
	if s.Attempt < 1 {
		return 1
	}
	return s.Attempt
}

// StepTerminal reports whether a step status is final.
func StepTerminal(status string) bool {
	switch status {
	case StepCompleted, StepFailed, StepSkipped, StepCancelled:
		return true
	}
	return false
}

// Worker is a registered worker, remote or in-process.
type Worker struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Tags         []string  `json:"tags"`
	Status       string    `json:"status"`
	LastSeen     time.Time `json:"last_seen"`
	RegisteredAt time.Time `json:"registered_at"`
	InProcess    bool      `json:"in_process"`
	// SecretSHA256 is the hex SHA-256 of the secret a remote worker got at
	// registration and proves itself with ("" for a worker that asked for
	// none); the secret itself is never kept.
	SecretSHA256 string `json:"secret_sha256,omitempty"`
}

// WorkerStep is a step a worker ran, as listed in the worker detail.
type WorkerStep struct {
	JobID        string     `json:"job_id"`
	Workspace    string     `json:"workspace"`
	TaskName     string     `json:"task_name"`
	AccessPath   string     `json:"access_path"` // the job's (see Job.AccessPath)
	JobStatus    string     `json:"job_status"`
	StepName     string     `json:"step_name"`
	ActionType   string     `json:"action_type"`
	Status       string     `json:"status"`
	StartedAt    *time.Time `json:"started_at"`
	CompletedAt  *time.Time `json:"completed_at"`
	ErrorMessage *string    `json:"error_message"`
}

// LogLine is one line of a job's JSONL log.
type LogLine struct {
	TS     time.Time `json:"ts"`
	Stream string    `json:"stream"` // stdout or stderr
	Step   string    `json:"step"`
	Line   string    `json:"line"`
	// Seq numbers a line pushed by a step run within that run, from 1 (0 =
	// unnumbered); a RunLogSink keeps the last one appended. It is not part
	// of the stored line.
	Seq int64 `json:"-"`
}

// LogQuery selects part of a job's log. Lines are numbered from 1 within
// the selection (the step's lines when Step is set), so After and Tail page
// through one step's log as they do through the whole.
type LogQuery struct {
	Step  string // only this step's lines ("" = every line)
	After int    // skip lines 1..After (0 = from the start)
	Tail  int    // only the last Tail lines (0 = no limit); not with After
}

// LogPage says which lines a read returned: Lines of them, and Next, the
// After that continues where this read stopped.
type LogPage struct {
	Lines int
	Next  int
}

// Claim is a step handed to a worker, with its action rendered in the step's scope.
type Claim struct {
	JobID      string
	Workspace  string
	Revision   string
	StepName   string
	ActionName string
	ActionType string
	Runner     string
	Image      string           // docker and pod actions
	Spec       *workflow.Action // templates rendered
	Input      map[string]any
	Timeout    time.Duration // 0 = none; the worker kills the step at its deadline
	// EventSource marks a step of an event source's consumer job: its
	// OUTPUT: lines are events (see Engine.Emit).
	EventSource bool
}

// StepRef names one step of one job.
type StepRef struct {
	JobID string
	Step  string
}

// StepResult is a worker's report of a finished step.
type StepResult struct {
	Output   map[string]any
	ExitCode int
	Error    *string
}

// CreateJob asks for a new job of a task.
type CreateJob struct {
	Workspace  string
	Task       string
	Input      map[string]any
	SourceType string
	SourceID   *string
	// Strict rejects input keys the task does not declare (ErrInvalid
	// naming them): set for input a person typed, as on the execute
	// endpoint; input the server builds (webhooks, triggers) is not strict.
	Strict bool
	// Fire, for a scheduler trigger's job (CreateTriggered only), is the
	// fire it records in the same commit that creates the job (or its
	// skipped record): a crash can lose neither without the other, so a
	// restart never fires a slot twice nor forgets one.
	Fire *TriggerFire
	// accessPath, set for a hook job, is the firing job's AccessPath, which
	// the hook job takes over; other jobs take their task's path.
	accessPath string
	// within, for a hook job, is the limits the firing job held: the hook
	// job runs within them (see slotsOf).
	within []string
	// Rerun makes the job a re-run of another: of its task, on the current
	// revision, with its input unless Input is given (then Strict applies
	// as for any input a person typed). Workspace and Task are taken from
	// the old job.
	Rerun *Rerun
	// IdempotencyKey, when set, makes the request once: a request with
	// a key a job was made with answers that job (a submission retried
	// after a broken connection or a failover never makes two jobs).
	IdempotencyKey string
}

// Rerun names the job a new job re-runs.
type Rerun struct {
	JobID string
	// FromFailed (only for a failed or cancelled job, else ErrConflict)
	// reuses the steps that completed in the old job, as long as every
	// step they depend on is reused too; the others run again.
	FromFailed bool
}

// Approval is an approver's answer to a waiting approval step.
type Approval struct {
	Approved        bool
	By              string         // who answered
	Input           map[string]any // checked against the approval action's input definitions; unknown keys are ErrInvalid
	RejectionReason string
}

// JobFilter selects a page of jobs, newest first. Every filter set must
// hold (they compose); the zero value lists every job.
type JobFilter struct {
	Workspace  string   // optional
	TaskName   string   // optional; requires Workspace
	Statuses   []string // optional: any of these job statuses
	SourceType string   // optional
	// Cursor, when set, starts the page at the job just older than it
	// (see CursorOf); Offset then skips from there.
	Cursor *JobCursor
	Limit  int
	Offset int
	// Queued keeps only the jobs waiting for a slot of a concurrency
	// limit or queue, in line order (by priority, then creation) rather
	// than newest first; the engine answers it from memory, and Cursor
	// does not apply.
	Queued bool
	// Visible, when set, keeps only the jobs it accepts by workspace and
	// access path (Job.AccessPath, never the task's current place): the
	// store skips the others while paging, so pages stay full and the
	// total counts only visible jobs. Access control sets it; nil shows
	// every job.
	Visible func(workspace, accessPath string) bool
}

// TriggerFire is a scheduler trigger's fire: the last fire time a Store
// keeps per workspace and trigger name.
type TriggerFire struct {
	Workspace string
	Trigger   string
	At        time.Time
}

// Batch is every record one group commit writes.
type Batch struct {
	Jobs    []*Job
	Steps   []*Step
	Workers []*Worker
	// Fires set triggers' last fire times, atomically with the jobs.
	Fires []TriggerFire
	// EventMarks (see Emit) are written with the jobs their events create.
	EventMarks []EventMark
	// Audit entries record the batch's changes (execute, cancel, re-run,
	// approval decisions) and the denied requests waiting for a commit:
	// the store numbers and signs them into the chain in the same
	// transaction as the records.
	Audit []audit.Entry
}

// PreparingStore is a Store that splits Commit in two, so the loop goes
// on while a batch is fsync'd: PrepareCommit, called on the loop, takes
// (encodes) everything it needs from the batch, whose records change as
// soon as it returns; the write it returns makes them durable, as Commit
// would, on another goroutine. Writes are called one at a time, in the
// order of their PrepareCommit calls, and each only after the one before
// it returned.
type PreparingStore interface {
	PrepareCommit(b *Batch) (write func(context.Context) error, err error)
}

// Store persists the engine's records. Commit must be durable (fsync'd)
// before it returns; it is called only from the orchestrator goroutine
// (a PreparingStore's writes run on another, one at a time), and must not
// keep references to the records after it returns. Reads may run
// concurrently with Commit.
type Store interface {
	Commit(ctx context.Context, b *Batch) error
	// LoadActive returns every non-terminal job, and every terminal one
	// with HooksPending, with all its steps, and all workers.
	LoadActive(ctx context.Context) (jobs []*Job, steps []*Step, workers []*Worker, err error)

	Job(ctx context.Context, id string) (*Job, error)         // ErrNotFound
	Steps(ctx context.Context, jobID string) ([]*Step, error) // ordered by Seq
	Jobs(ctx context.Context, f JobFilter) ([]*Job, int, error)
	Worker(ctx context.Context, id string) (*Worker, error) // ErrNotFound
	Workers(ctx context.Context, limit, offset int) ([]*Worker, int, error)
	// WorkerSteps returns the newest steps a worker claimed, at most limit, and their total.
	WorkerSteps(ctx context.Context, workerID string, limit int) ([]*WorkerStep, int, error)
}

// KeyedJobs is a Store that finds a job by the idempotency key it was
// made with (Job.IdempotencyKey): "" when no stored job has the key.
type KeyedJobs interface {
	JobByIdempotencyKey(ctx context.Context, key string) (string, error)
}

// Workspaces gives the engine the loaded workspaces.
type Workspaces interface {
	// Current returns the active revision of a workspace.
	Current(name string) (*workflow.Workspace, bool)
	// Revision returns a given revision if it is still loaded (running jobs finish on theirs).
	Revision(name, revision string) (*workflow.Workspace, bool)
}

// LogSink receives the engine's server-side log lines (step `_server`).
type LogSink interface {
	Append(jobID string, lines []LogLine) error
	// Finish is called once a job is terminal and committed: its log is
	// complete, so live viewers can be told the stream has ended.
	Finish(jobID string)
}

// StepLogEnder is a LogSink that wants to hear when a step run ends (it
// completed, failed, timed out, was cancelled or skipped), after the lines
// the batch that ended it logged: the log store closes the run's
// accounting of the step_log limit then.
type StepLogEnder interface {
	EndStep(jobID, step string) error
}

// RunLogSink is a LogSink that appends the lines a step run pushed,
// numbered from 1 within the run (LogLine.Seq), only once: it keeps the
// run and the number of the last line appended with the lines themselves,
// and skips the lines numbered at or below it for the same run, so a push
// repeated because its answer was lost writes no line twice, even to a
// server restarted meanwhile. Unnumbered lines (Seq 0) are always
// appended; another run of the step numbers afresh.
type RunLogSink interface {
	AppendRun(jobID, step, run string, lines []LogLine) error
}

// Clock is the engine's source of time, injected so tests need not sleep.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	Stop() bool
}
