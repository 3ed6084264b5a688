// Package runners is the worker side: the worker loop (register, heartbeat,
// claim, run, report, push logs), the workspace cache, and the runners that
// execute a step (local process, docker, pod).
package runners

import (
	"context"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Server is what a worker needs from the server. Two transports implement
// it: an HTTP client for remote workers and a direct adapter onto the engine
// for the in-process pool.
type Server interface {
	Register(ctx context.Context, name string, tags []string) (workerID string, err error)
	// Heartbeat says the worker is alive and lists the steps it runs, from
	// each claim's arrival until its completion is acknowledged (never nil).
	// ErrUnknownWorker when the server forgot the worker.
	Heartbeat(ctx context.Context, workerID string, running []StepRef) error
	// Claim long-polls for a step; nil without error means no work.
	Claim(ctx context.Context, workerID string, tags []string) (*Assignment, error)
	Start(ctx context.Context, workerID, jobID, step string) error
	Complete(ctx context.Context, workerID, jobID, step string, res Result) error
	// PushLogs appends lines of a step the worker (push.WorkerID) holds to
	// the job's log and reports whether the job was cancelled; ErrConflict
	// when the step is no longer this worker's.
	PushLogs(ctx context.Context, jobID string, push LogPush) (cancelled bool, err error)
	// Cancelled long-polls until the job is cancelled or wait ends.
	Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error)
	// StepToken mints a short-lived token that downloads the workspace
	// revision of a step the worker holds, only while the step runs: what
	// a pod's init container fetches the workspace with, instead of the
	// worker token.
	StepToken(ctx context.Context, workerID, jobID, step string) (string, error)
	// Workspace returns a local directory holding the workspace's files at
	// the given revision (downloaded and cached by remote workers).
	Workspace(ctx context.Context, workspace, revision string) (dir string, err error)
}

// Assignment is a claimed step: the body of POST /worker/jobs/claim.
// With no work, JobID and StepName are empty and ActionSpec is nil.
type Assignment struct {
	JobID       string           `json:"job_id"`
	Workspace   string           `json:"workspace"`
	Revision    string           `json:"revision"`
	StepName    string           `json:"step_name"`
	ActionName  string           `json:"action_name"`
	ActionType  string           `json:"action_type"`
	ActionImage *string          `json:"action_image"`
	Runner      string           `json:"runner"`
	ActionSpec  *workflow.Action `json:"action_spec"`
	Input       map[string]any   `json:"input"`
	TimeoutSecs float64          `json:"timeout_secs,omitempty"` // 0 = none
	// EventSource (ours) marks a step of an event source's consumer job:
	// each `OUTPUT: ` line of its stdout is an event, and the worker reads
	// no further than a few undelivered events ahead (back-pressure).
	EventSource bool `json:"event_source,omitempty"`
}

// StepRef names a step a worker runs, in heartbeats.
type StepRef struct {
	JobID string `json:"job_id"`
	Step  string `json:"step_name"`
}

// Result is the body of POST /worker/jobs/{id}/steps/{step}/complete.
type Result struct {
	WorkerID string         `json:"worker_id,omitempty"`
	Output   map[string]any `json:"output"`
	ExitCode int            `json:"exit_code"`
	Error    *string        `json:"error"`
}

// LogPush is the body of POST /worker/jobs/{id}/logs.
type LogPush struct {
	// WorkerID (ours) names the worker holding the step: only it may push.
	WorkerID string `json:"worker_id"`
	StepName string `json:"step_name"`
	// Run (ours, optional) names the step run whose lines these are: with
	// it, lines carry their number in the run and the server appends only
	// those it does not have, so a push repeated because its answer was
	// lost does not write lines twice.
	Run   string    `json:"run,omitempty"`
	Lines []LogLine `json:"lines"`
}

// LogLine is one pushed line; the step name travels once per push.
type LogLine struct {
	// Seq (ours) numbers the line in its run from 1; 0 = unnumbered.
	Seq    int64     `json:"seq,omitempty"`
	TS     time.Time `json:"ts"`
	Stream string    `json:"stream"`
	Line   string    `json:"line"`
}
