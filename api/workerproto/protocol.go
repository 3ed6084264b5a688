// Package workerproto is the worker protocol's wire: the bodies workers send
// and the answers they get, the rules every report obeys, and the kinds of
// refusal. Both transports (HTTP for remote workers, direct calls for the
// in-process pool) speak it; of this module it imports only the workflow
// model, for the action a claim carries, and engine/jsonstr, for the decoder of
// log pushes.
// Shared by api/dispatch and runners/worker, it must not import net/http,
// echo, engine, engine/workspace, api or api/dispatch.
package workerproto

import (
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Streams of a log line.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// SecretHeader carries a worker's secret on every call after its
// registration (ours): the worker token admits any worker, the secret
// proves which one a report comes from.
const SecretHeader = "X-Worker-Secret"

// Register is the body of POST /worker/register.
type Register struct {
	Name string   `json:"name"`
	Tags []string `json:"tags"`
	// WantSecret (ours) asks for a secret that proves, on every later
	// call, that a report naming this worker comes from it. Without it
	// the server registers the worker only under worker_protocol:
	// interface, and anyone holding the worker token may then report
	// as that worker.
	WantSecret bool `json:"want_secret,omitempty"`
}

// Registered answers Register.
type Registered struct {
	WorkerID string `json:"worker_id"`
	// Secret (ours) is the worker's secret, when it asked for one: sent
	// back in SecretHeader, never shown again (the server keeps its
	// SHA-256 only).
	Secret string `json:"worker_secret,omitempty"`
}

// Heartbeat is the body of POST /worker/heartbeat. Running (ours,
// optional) lists the steps the worker runs, so a claim whose answer was
// lost is recovered; nil = not listed.
type Heartbeat struct {
	WorkerID string    `json:"worker_id"`
	Running  []StepRef `json:"running"`
}

// StepRef names a step a worker runs, in heartbeats.
type StepRef struct {
	JobID string `json:"job_id"`
	Step  string `json:"step_name"`
}

// Claim is the body of POST /worker/jobs/claim. Tags is accepted, as the
// interface sends it, and ignored: a worker claims with the tags it
// registered with. That keeps a claim to the steps meant for the worker it
// names; only the worker's secret (SecretHeader) keeps a caller to the
// worker it is.
type Claim struct {
	WorkerID string   `json:"worker_id"`
	Tags     []string `json:"tags"`
	// JobID (ours) claims a step of that local job, which the worker holds
	// (local execution mode); empty claims from the shared ready queue.
	JobID string `json:"job_id,omitempty"`
}

// Claims is the body of POST /worker/claims (ours): a claim of up to Max
// ready steps at once (a worker asks for as many as it has free slots),
// which starts them and is answered once that is durable, so the worker
// runs each step at once and sends no start report.
//
// Results, when present, are the worker's results of steps it holds, as
// POST /worker/reports carries them: they are recorded first, in the
// same commit as the claim, and the claim then does not wait for work
// (a result is not held up by a long-poll).
type Claims struct {
	WorkerID string       `json:"worker_id"`
	Max      int          `json:"max"` // 0 = 1; at most MaxClaims
	Results  []StepResult `json:"results,omitempty"`
}

// Assignments answers Claims: the steps claimed, none when the wait ended
// with no work; and the answer to each of the claim's results, in order.
type Assignments struct {
	Assignments []Assignment   `json:"assignments"`
	Results     []ReportAnswer `json:"results,omitempty"`
}

// LocalJob is the body of POST /worker/jobs (ours): local execution mode,
// where the worker creates a job it holds whole and runs every step of it
// (`appliance run --local`).
type LocalJob struct {
	WorkerID  string         `json:"worker_id"`
	Workspace string         `json:"workspace"`
	Task      string         `json:"task"`
	Input     map[string]any `json:"input"`
}

// LocalJobCreated answers POST /worker/jobs.
type LocalJobCreated struct {
	JobID    string `json:"job_id"`
	Revision string `json:"revision"`
}

// JobDone is the body of POST /worker/jobs/{id}/complete: worker_id (ours,
// required) names the holder of the local job; the interface's output is
// accepted, but the job's output is its sink steps' outputs, which the
// worker reported one by one, as for every job.
type JobDone struct {
	WorkerID string         `json:"worker_id"`
	Output   map[string]any `json:"output"`
}

// JobCompleted answers POST /worker/jobs/{id}/complete.
type JobCompleted struct {
	Status    string `json:"status"`
	JobStatus string `json:"job_status"`
}

// Assignment is a claimed step: the answer of POST /worker/jobs/claim.
// With no work, JobID and StepName are empty and ActionSpec is nil.
type Assignment struct {
	JobID       string  `json:"job_id"`
	Workspace   string  `json:"workspace"`
	Revision    string  `json:"revision"`
	StepName    string  `json:"step_name"`
	ActionName  string  `json:"action_name"`
	ActionType  string  `json:"action_type"`
	ActionImage *string `json:"action_image"`
	Runner      string  `json:"runner"`
	// ActionSpec is the fully resolved action, templates rendered.
	ActionSpec  *workflow.Action `json:"action_spec"`
	Input       map[string]any   `json:"input"`
	TimeoutSecs float64          `json:"timeout_secs,omitempty"` // 0 = none
	// EventSource (ours) marks a step of an event source's consumer job:
	// each `OUTPUT: ` line of its stdout is an event, and the worker reads
	// no further than a few undelivered events ahead (back-pressure).
	EventSource bool `json:"event_source,omitempty"`
}

// WorkerRef is the body of the reports that only name their worker:
// POST .../steps/{step}/start and .../workspace-token.
type WorkerRef struct {
	WorkerID string `json:"worker_id"`
}

// Result is the body of POST /worker/jobs/{id}/steps/{step}/complete.
// WorkerID (ours) names the holder; under worker_protocol: interface it
// may be left out, and the step's holder is meant.
type Result struct {
	WorkerID string         `json:"worker_id,omitempty"`
	Output   map[string]any `json:"output"`
	ExitCode int            `json:"exit_code"`
	Error    *string        `json:"error"`
}

// Reports is the body of POST /worker/reports (ours): the results of
// several steps one worker holds, in one request, so the reports due at
// once share one commit. Each is answered on its own (see ReportAnswers).
type Reports struct {
	Results []StepResult `json:"results"`
}

// StepResult is one step's result in Reports: the step, and the body of
// .../steps/{step}/complete.
type StepResult struct {
	JobID    string `json:"job_id"`
	StepName string `json:"step_name"`
	Result
}

// ReportAnswers answers Reports item by item, in order: each has the
// status and error the report would have had alone.
type ReportAnswers struct {
	Results []ReportAnswer `json:"results"`
}

// ReportAnswer is one report's answer: an HTTP status (200 when taken)
// and, when refused, why.
type ReportAnswer struct {
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// LogPush is the body of POST /worker/jobs/{id}/logs.
type LogPush struct {
	// WorkerID (ours) names the worker holding the step: only it may push
	// (left out under worker_protocol: interface, the holder is meant).
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

// Pushed answers LogPush: Cancelled tells the worker to stop the step.
type Pushed struct {
	Status    string `json:"status"`
	Cancelled bool   `json:"cancelled"`
}

// Cancelled answers GET /worker/jobs/{id}/cancelled.
type Cancelled struct {
	Cancelled bool `json:"cancelled"`
}

// StepToken answers POST .../steps/{step}/workspace-token: a short-lived
// token that downloads the step's workspace revision while the step runs.
type StepToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Status is the answer of the reports that only acknowledge.
type Status struct {
	Status string `json:"status"`
}

// OK acknowledges a report.
var OK = Status{Status: "ok"}
