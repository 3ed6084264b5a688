package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/appliance-sh/appliance/api/dispatch"
	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners/worker"
)

// inProcessClaimWait is how long an in-process claim long-polls; it only
// bounds how often an idle slot wakes up.
const inProcessClaimWait = time.Minute

// workspaceLookup finds a loaded workspace revision.
type workspaceLookup interface {
	Current(name string) (*workflow.Workspace, bool)
	Revision(name, revision string) (*workflow.Workspace, bool)
}

// inProcessServer is the worker protocol's direct transport: the
// in-process pool runs the same worker loop as a remote worker, and its
// calls go to the same service as the HTTP handlers', without HTTP, so
// they are answered and refused alike.
type inProcessServer struct {
	service    *dispatch.Service
	workspaces workspaceLookup
	// files, if set, extracts each job's revision snapshot.
	files *worker.SnapshotWorkspaces
	// registered, if set, is called once the pool has registered.
	registered func()
	claimWait  time.Duration // how long a claim long-polls
	// kind is which steps this pool claims: jobs' steps, or event
	// sources' consumer steps, each pool with slots of its own.
	kind engine.StepKind
}

func newInProcessServer(svc *dispatch.Service, ws workspaceLookup) *inProcessServer {
	return &inProcessServer{service: svc, workspaces: ws, claimWait: inProcessClaimWait}
}

var _ worker.Server = (*inProcessServer)(nil)

func (s *inProcessServer) Register(ctx context.Context, name string, tags []string) (string, error) {
	ans, err := s.service.Register(ctx, dispatch.InProcess, workerproto.Register{Name: name, Tags: tags})
	if err == nil && s.registered != nil {
		s.registered()
	}
	return ans.WorkerID, err
}

func (s *inProcessServer) Heartbeat(ctx context.Context, workerID string, running []workerproto.StepRef) error {
	return s.service.Heartbeat(ctx, dispatch.InProcess, workerproto.Heartbeat{WorkerID: workerID, Running: running})
}

// Claim passes tags on, and the service ignores them: the engine matches
// the tags the worker registered with.
func (s *inProcessServer) Claim(ctx context.Context, workerID string, tags []string) (*workerproto.Assignment, error) {
	return s.service.ClaimKind(ctx, dispatch.InProcess, workerproto.Claim{WorkerID: workerID, Tags: tags}, s.claimWait, s.kind)
}

func (s *inProcessServer) Start(ctx context.Context, workerID, jobID, step string) error {
	return s.service.StartInProcess(ctx, jobID, step, workerproto.WorkerRef{WorkerID: workerID})
}

func (s *inProcessServer) Complete(ctx context.Context, workerID, jobID, step string, res workerproto.Result) error {
	res.WorkerID = workerID
	return s.service.CompleteInProcess(ctx, jobID, step, res)
}

var _ worker.HandBacker = (*inProcessServer)(nil)

// HandBack gives back a step the pool stopped at the drain deadline: the
// server is shutting down, and the step runs again from the start at its
// next start (DESIGN: a graceful stop finishes or hands back its steps).
func (s *inProcessServer) HandBack(ctx context.Context, workerID, jobID, step, reason string) error {
	return s.service.HandBackInProcess(ctx, jobID, step, "the server shut down and "+reason, workerproto.WorkerRef{WorkerID: workerID})
}

func (s *inProcessServer) PushLogs(ctx context.Context, jobID string, push workerproto.LogPush) (bool, error) {
	ans, err := s.service.PushLogs(ctx, dispatch.InProcess, jobID, push)
	return ans.Cancelled, err
}

func (s *inProcessServer) StepToken(ctx context.Context, workerID, jobID, step string) (string, error) {
	ans, err := s.service.StepToken(ctx, dispatch.InProcess, jobID, step, workerproto.WorkerRef{WorkerID: workerID})
	return ans.Token, err
}

func (s *inProcessServer) Cancelled(ctx context.Context, jobID string, wait time.Duration) (bool, error) {
	return s.service.Cancelled(ctx, jobID, wait)
}

var _ worker.CancelNotifier = (*inProcessServer)(nil)

func (s *inProcessServer) OnCancelled(ctx context.Context, jobID string, f func()) (func() bool, error) {
	return s.service.OnCancelled(ctx, jobID, f)
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
		if !errors.Is(err, worker.ErrNotFound) {
			return dir, err
		}
	}
	if ws, ok := s.workspaces.Revision(name, revision); ok {
		return ws.Dir, nil
	}
	if ws, ok := s.workspaces.Current(name); ok {
		return ws.Dir, nil
	}
	return "", fmt.Errorf("workspace %q: %w", name, worker.ErrNotFound)
}
