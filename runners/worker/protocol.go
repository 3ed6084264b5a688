package worker

import (
	"context"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Server is what a worker needs from the server. Two transports implement
// it: an HTTP client for remote workers and a direct adapter onto the engine
// for the in-process pool.
type Server interface {
	Register(ctx context.Context, name string, tags []string) (workerID string, err error)
	// Heartbeat says the worker is alive and lists the steps it runs, from
	// each claim's arrival until its completion is acknowledged (never nil).
	// ErrUnknownWorker when the server forgot the worker.
	Heartbeat(ctx context.Context, workerID string, running []workerproto.StepRef) error
	// Claim long-polls for a step; nil without error means no work.
	Claim(ctx context.Context, workerID string, tags []string) (*workerproto.Assignment, error)
	Start(ctx context.Context, workerID, jobID, step string) error
	Complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result) error
	// PushLogs appends lines of a step the worker (push.WorkerID) holds to
	// the job's log and reports whether the job was cancelled; ErrConflict
	// when the step is no longer this worker's.
	PushLogs(ctx context.Context, jobID string, push workerproto.LogPush) (cancelled bool, err error)
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

// StepsClaimer is a Server that hands several steps per claim, started
// and durable once answered (the HTTP transport): the worker's slots
// share one claim for as many steps as they are free, and each runs its
// step at once, with no start report.
type StepsClaimer interface {
	// ClaimSteps long-polls for up to max steps; none without error means
	// no work.
	ClaimSteps(ctx context.Context, workerID string, max int) ([]*workerproto.Assignment, error)
}

// rawPusher is a Server that sends a push's lines as the spool holds them
// (the HTTP transport), rather than decoded: see rawJournal.
type rawPusher interface {
	// pushRaw is PushLogs with the lines already coded: lines holds the
	// elements of the push's lines, comma-separated (see batch.raw).
	pushRaw(ctx context.Context, jobID string, push workerproto.LogPush, lines []byte) (cancelled bool, err error)
}

// resultPairer is a StepsClaimer whose claims carry the worker's results
// (the HTTP transport): a slot holds its step's result for its next claim,
// so the result and the claim share one request and one commit, and the
// step the result makes ready can be among those claimed. A held result
// never waits behind a claim that may wait for work, nor behind the pause
// between claims: the slot then claims on its own (claimCarrying).
type resultPairer interface {
	StepsClaimer
	// completeHeld is Complete, the result held for the worker's next
	// claim; h is ready once the result is queued.
	completeHeld(ctx context.Context, workerID, jobID, step string, res workerproto.Result, h *resultHold) error
	// releaseHeld sends h's result on its own if no claim took it; a
	// result reported after its release is not held.
	releaseHeld(h *resultHold)
	// holdNone sends every held result on its own until resume is called
	// (the worker pauses between claims; polling then reports true).
	holdNone() (resume func())
	// polling reports whether a claim that may wait for work (carrying
	// none) is on its way, or the worker pauses between claims: a result
	// held now would wait for it.
	polling() bool
	// claimCarrying sends one claim of up to max steps carrying the
	// worker's queued results, held ones too, and never waits for work;
	// with no result to carry it sends nothing.
	claimCarrying(ctx context.Context, workerID string, max int) ([]*workerproto.Assignment, error)
}

// Prover is a Server whose workers prove who they are with a secret they
// get at registration (the HTTP transport). A worker keeps each step
// run's secret with it in the spool, so a run an earlier process left is
// still reported as the worker that ran it.
type Prover interface {
	// Secret is the secret of a worker registered through this server
	// ("" if none).
	Secret(workerID string) string
	// Remember has the reports naming workerID carry secret: a worker of
	// an earlier process, whose runs the spool kept.
	Remember(workerID, secret string)
}

// CancelNotifier is a Server that calls back when a job is cancelled,
// rather than being long-polled for it (Cancelled): the in-process
// transport, where a poll per running step would cost a goroutine and a
// timer per step.
type CancelNotifier interface {
	// OnCancelled has f called, on a goroutine of its own, if the job is
	// cancelled (at once if it was); stop undoes it.
	OnCancelled(ctx context.Context, jobID string, f func()) (stop func() bool, err error)
}

// HandBacker is a Server that takes back a step the worker stopped at its
// drain deadline, to run it again from the start, rather than the step's
// failed result: the in-process transport, whose worker stops because the
// server does, and whose server starts the step again at its next start.
type HandBacker interface {
	// HandBack gives the step back; reason says why, for the job's log.
	HandBack(ctx context.Context, workerID, jobID, step, reason string) error
}

// The worker protocol's wire types, as this package names them.
type (
	Assignment = workerproto.Assignment
	StepRef    = workerproto.StepRef
	Result     = workerproto.Result
	LogPush    = workerproto.LogPush
	LogLine    = workerproto.LogLine
)
