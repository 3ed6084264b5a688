package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/runners/worker"
)

// localLogPush is how often `run --local` sends (and prints) step output.
const localLogPush = 250 * time.Millisecond

// runLocal is `appliance run --local TASK`: this process joins the server
// as a worker, creates a job of the task that it holds whole (source_type
// local: no other worker ever gets its steps), runs each step the server
// hands it with this machine's runners, reporting start, logs and result
// as any worker does, prints the steps' output as it goes, and completes
// the job at the end. The server still decides the DAG: promotion, `when`,
// for_each, retries, templates, approvals and the job's status.
func runLocal(cc *clientCommand, ws, task string, input map[string]any, token string) int {
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		if ws == "" {
			var err error
			if ws, err = workspaceOf(ctx, c, task); err != nil {
				return 1, fmt.Errorf("%w (pass --workspace to name it)", err)
			}
		}
		return localJob(ctx, cc, ws, task, input, token)
	})
}

func localJob(ctx context.Context, cc *clientCommand, ws, task string, input map[string]any, token string) (int, error) {
	log := slog.New(slog.NewTextHandler(cc.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client := worker.NewClient(*cc.server, token, nil)
	wcfg := worker.Config{
		Name:            Hostname() + "-local",
		Tags:            []string{},
		MaxConcurrent:   max(2, runtime.NumCPU()),
		LogPushInterval: localLogPush,
		IdlePause:       time.Millisecond,
		// Ctrl-C stops the run soon: running steps get this long to end.
		DrainTimeout: 10 * time.Second,
	}
	if err := DetectRunners(ctx, *cc.server, &wcfg, log); err != nil {
		return 2, err
	}
	workerID, err := client.Register(ctx, wcfg.Name, wcfg.Tags)
	if errors.Is(err, worker.ErrUnauthorized) {
		return 1, errors.New("worker token rejected by the server: --worker-token must equal the server's worker_token")
	}
	if err != nil {
		return 1, err
	}
	jobID, err := client.CreateLocalJob(ctx, workerID, ws, task, input)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(cc.stdout, "job %s: running %s/%s on this machine\n", jobID, ws, task)

	srv := &localServer{Client: client, workerID: workerID, jobID: jobID, out: cc.stdout, ended: make(chan struct{})}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- worker.New(onlyItsJob{srv, srv}, wcfg, log).Run(runCtx) }()
	var runErr error
	select {
	case <-srv.ended: // the server says the job has ended
		stop()
		runErr = <-done
	case runErr = <-done: // interrupted (the steps were drained), or the worker failed
	}
	// Whatever happened, the job ends now: steps not run are cancelled.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, err := client.CompleteJob(cctx, workerID, jobID)
	if err != nil {
		return 1, errors.Join(runErr, err)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return 1, runErr
	}
	fmt.Fprintf(cc.stdout, "job %s %s\n", jobID, status)
	if ctx.Err() != nil {
		return exitJobCancelled, nil
	}
	return jobExitCode(status), nil
}

// localServer is the worker protocol for one local job: claims ask for its
// steps only, and the steps' output and failures are printed on the way.
type localServer struct {
	*worker.Client
	workerID, jobID string
	out             io.Writer

	mu        sync.Mutex
	once      sync.Once
	ended     chan struct{} // closed once a claim says the job has ended
	registers int
}

// Register hands the worker loop the id the job was created for; should
// the server forget it, a new registration cannot hold the job, and its
// next claim ends the run.
func (s *localServer) Register(ctx context.Context, name string, tags []string) (string, error) {
	s.mu.Lock()
	s.registers++
	first := s.registers == 1
	s.mu.Unlock()
	if first {
		return s.workerID, nil
	}
	return s.Client.Register(ctx, name, tags)
}

// Claim asks for a ready step of the job; once the job has ended it waits
// for the run to stop.
func (s *localServer) Claim(ctx context.Context, workerID string, _ []string) (*worker.Assignment, error) {
	select {
	case <-s.ended:
		<-ctx.Done()
		return nil, ctx.Err()
	default:
	}
	a, err := s.ClaimJob(ctx, workerID, s.jobID)
	if errors.Is(err, worker.ErrConflict) {
		s.once.Do(func() { close(s.ended) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return a, err
}

func (s *localServer) PushLogs(ctx context.Context, jobID string, push worker.LogPush) (bool, error) {
	cancelled, err := s.Client.PushLogs(ctx, jobID, push)
	if err == nil {
		s.mu.Lock()
		for _, l := range push.Lines {
			fmt.Fprintf(s.out, "[%s] %s\n", push.StepName, l.Line)
		}
		s.mu.Unlock()
	}
	return cancelled, err
}

func (s *localServer) Complete(ctx context.Context, workerID, jobID, step string, res worker.Result) error {
	err := s.Client.Complete(ctx, workerID, jobID, step, res)
	if err == nil && (res.ExitCode != 0 || res.Error != nil) {
		msg := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Error != nil {
			msg = strings.ReplaceAll(strings.TrimRight(*res.Error, "\n"), "\n", "\n    ")
		}
		s.mu.Lock()
		fmt.Fprintf(s.out, "step %s failed: %s\n", step, msg)
		s.mu.Unlock()
	}
	return err
}

// onlyItsJob is the localServer as the worker loop sees it: the worker
// protocol and the proof of identity, but not the client's claims of
// several (worker.StepsClaimer), which take any ready step the worker's
// tags cover. A run --local worker claims only its own job's steps, one
// at a time (localServer.Claim).
type onlyItsJob struct {
	worker.Server
	worker.Prover
}
