package runners

import (
	"context"
	"errors"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// Runner executes one step: a local process, a container or a pod. Runners
// are chosen by the assignment's `runner` name.
type Runner interface {
	// Run executes the step, sending every output line to step.Log, and
	// returns the exit code of what it ran. An error means the step could not
	// be run at all (no interpreter, bad workdir, failed dependency install).
	// When ctx ends, Run kills what it started before returning.
	Run(ctx context.Context, step *Step) (exitCode int, err error)
}

// Step is what a runner needs to execute one claimed step.
type Step struct {
	JobID     string
	Name      string
	Workspace string
	Revision  string // of the workspace; caches (dependencies) are per revision
	Dir       string // local directory holding the workspace's files
	Action    *workflow.Action
	Input     map[string]any
	// WorkspaceToken mints a short-lived token that downloads this step's
	// workspace revision while the step runs (for a pod's init container;
	// nil when the server cannot mint one).
	WorkspaceToken func(ctx context.Context) (string, error)
	// Log receives each output line with its stream, "stdout" or "stderr".
	// It is called from several goroutines and must be safe for that.
	Log func(stream, line string)
	// Flush, if set, is called when a reader of the step's output has
	// passed Log all it read, so that its next read may wait for the step:
	// a Log that holds lines back, to write them together, writes them
	// then. Lines logged otherwise are written at the sink's own bounds.
	Flush func()
}

// Stream names of log lines.
const (
	Stdout = workerproto.Stdout
	Stderr = workerproto.Stderr
)

// ErrNoLog guards against a Step without a log sink.
var ErrNoLog = errors.New("step has no log sink")

// Result is what a step's run comes to, as a worker reports it.
type Result = workerproto.Result
