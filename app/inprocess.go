package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/api"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
)

// inProcessClaimWait is how long an in-process claim long-polls; it only
// bounds how often an idle slot wakes up.
const inProcessClaimWait = time.Minute

// workspaceLookup finds a loaded workspace revision.
type workspaceLookup interface {
	Current(name string) (*workflow.Workspace, bool)
	Revision(name, revision string) (*workflow.Workspace, bool)
}

// inProcessServer is the worker protocol's direct transport onto the
// engine: the in-process pool runs the same worker loop as a remote worker,
// without HTTP.
type inProcessServer struct {
	engine     *engine.Engine
	workspaces workspaceLookup
	// files, if set, extracts each job's revision snapshot.
	files *runners.SnapshotWorkspaces
	// registered, if set, is called once the pool has registered.
	registered func()
}

func newInProcessServer(e *engine.Engine, ws workspaceLookup) *inProcessServer {
	return &inProcessServer{engine: e, workspaces: ws}
}

var _ runners.Server = (*inProcessServer)(nil)

func (s *inProcessServer) Register(ctx context.Context, name string, tags []string) (string, error) {
	id, err := s.engine.RegisterWorker(ctx, name, tags, true)
	if err == nil && s.registered != nil {
		s.registered()
	}
	return id, err
}

func (s *inProcessServer) Heartbeat(ctx context.Context, workerID string, running []runners.StepRef) error {
	refs := make([]engine.StepRef, len(running))
	for i, r := range running {
		refs[i] = engine.StepRef{JobID: r.JobID, Step: r.Step}
	}
	err := s.engine.Heartbeat(ctx, workerID, refs)
	if errors.Is(err, engine.ErrNotFound) {
		return fmt.Errorf("%w: %v", runners.ErrUnknownWorker, err)
	}
	return err
}

// protocolError gives an engine refusal the worker protocol's meaning, as
// the HTTP transport's status codes do for remote workers.
func protocolError(err error) error {
	switch {
	case errors.Is(err, engine.ErrConflict):
		return fmt.Errorf("%w: %v", runners.ErrConflict, err)
	case errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("%w: %v", runners.ErrNotFound, err)
	}
	return err
}

// Claim ignores tags: the engine matches the tags the worker registered with.
func (s *inProcessServer) Claim(ctx context.Context, workerID string, _ []string) (*runners.Assignment, error) {
	c, err := s.engine.Claim(ctx, workerID, inProcessClaimWait)
	if err != nil || c == nil {
		return nil, protocolError(err)
	}
	return api.AssignmentOf(c), nil
}

func (s *inProcessServer) Start(ctx context.Context, workerID, jobID, step string) error {
	return protocolError(s.engine.StartStep(ctx, workerID, jobID, step))
}

func (s *inProcessServer) Complete(ctx context.Context, workerID, jobID, step string, res runners.Result) error {
	return protocolError(s.engine.CompleteStep(ctx, workerID, jobID, step, engine.StepResult{
		Output: res.Output, ExitCode: res.ExitCode, Error: res.Error,
	}))
}

// PushLogs obeys the rule the HTTP transport does: only the holder of a
// running step writes its lines.
func (s *inProcessServer) PushLogs(ctx context.Context, jobID string, push runners.LogPush) (bool, error) {
	if err := s.engine.CheckHolder(ctx, push.WorkerID, jobID, push.StepName); err != nil {
		return false, protocolError(err)
	}
	// The engine masks the job's secrets on the way in.
	if err := s.engine.AppendLog(jobID, api.LogLinesOf(push.StepName, push.Lines)); err != nil {
		return false, err
	}
	return s.engine.WaitCancelled(ctx, jobID, 0)
}

func (s *inProcessServer) Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	return s.engine.WaitCancelled(ctx, jobID, wait)
}

// Workspace returns the files of the job's revision: extracted from its
// snapshot like a remote worker's download, so editing the workspace
// folder while a job runs changes nothing for it. Without snapshots (a
// test wiring), or when the workspace has none at all (its files are over
// limits.workspace_size), it is the live folder, as remote workers could
// not run it either.
func (s *inProcessServer) Workspace(ctx context.Context, name, revision string) (string, error) {
	if s.files != nil {
		dir, err := s.files.Get(ctx, name, revision)
		if !errors.Is(err, runners.ErrNotFound) {
			return dir, err
		}
	}
	if ws, ok := s.workspaces.Revision(name, revision); ok {
		return ws.Dir, nil
	}
	if ws, ok := s.workspaces.Current(name); ok {
		return ws.Dir, nil
	}
	return "", fmt.Errorf("workspace %q: %w", name, runners.ErrNotFound)
}
