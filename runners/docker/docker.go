package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/appliance-sh/appliance/runners"
	docker "github.com/fsouza/go-dockerclient"
)

// Config configures the docker runner. Zero values are defaults.
type Config struct {
	// Endpoint is the daemon's address (default $DOCKER_HOST, else the
	// local unix socket).
	Endpoint string
	// Images maps a script language (shell, python, javascript, typescript,
	// go) to the image its scripts run in with runner docker; languages not
	// named keep runners.DefaultImages.
	Images map[string]string
	// KillGrace is how long a cancelled step's container has to exit after
	// SIGTERM before it is killed (default 5s; whole seconds, at least 1).
	KillGrace time.Duration
	// Log receives what cannot be reported with a step, such as a container
	// that could not be removed (default slog.Default()).
	Log *slog.Logger
}

// dockerOpTimeout bounds one daemon call that must not hang a step (create,
// copy, start, stop, remove), whatever the step's own deadline.
const dockerOpTimeout = 30 * time.Second

// Runner runs docker actions, and script actions with runner docker, as
// containers of a Docker daemon.
type Runner struct {
	cfg    Config
	client *docker.Client
}

// New returns the docker runner. It does not contact the daemon; see
// Ping.
func New(cfg Config) (*Runner, error) {
	images, err := runners.LanguageImages(cfg.Images)
	if err != nil {
		return nil, err
	}
	cfg.Images = images
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.KillGrace < time.Second {
		if cfg.KillGrace <= 0 {
			cfg.KillGrace = 5 * time.Second
		} else {
			cfg.KillGrace = time.Second
		}
	}
	var client *docker.Client
	if cfg.Endpoint == "" {
		client, err = docker.NewClientFromEnv()
	} else {
		client, err = docker.NewClient(cfg.Endpoint)
	}
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Runner{cfg: cfg, client: client}, nil
}

// Ping reports whether the daemon answers.
func (d *Runner) Ping(ctx context.Context) error {
	if err := d.client.PingWithContext(ctx); err != nil {
		return fmt.Errorf("docker daemon at %s: %w", d.client.Endpoint(), err)
	}
	return nil
}

// Run runs the step in a new container and removes the container
// afterwards, whatever happened. When ctx ends the container is stopped:
// SIGTERM, then SIGKILL after the grace period.
func (d *Runner) Run(ctx context.Context, step *runners.Step) (int, error) {
	if step.Log == nil {
		return 0, runners.ErrNoLog
	}
	spec, err := d.specFor(step)
	if err != nil {
		return 0, err
	}
	if err := d.ensureImage(ctx, spec.opts.Config.Image, step.Log); err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, context.Cause(ctx)
	}

	// Daemon calls that create or clean up run apart from ctx: a create cut
	// short by a cancel could leave a container behind that no one removes.
	opCtx := context.WithoutCancel(ctx)
	createCtx, cancel := context.WithTimeout(opCtx, dockerOpTimeout)
	spec.opts.Context = createCtx
	c, err := d.client.CreateContainer(spec.opts)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("create container from %s: %w", spec.opts.Config.Image, err)
	}
	defer d.remove(opCtx, c.ID)

	if err := d.copyFiles(opCtx, c.ID, spec.files); err != nil {
		return 0, err
	}
	return d.runContainer(ctx, c.ID, step.Log, step.Flush)
}

// runContainer attaches to the created container, starts it, streams its
// output and waits for it to exit or for ctx to end.
func (d *Runner) runContainer(ctx context.Context, id string, log func(stream, line string), flush func()) (int, error) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	var readers runners.OutputReaders
	readers.Start(outR, runners.Stdout, log, flush)
	readers.Start(errR, runners.Stderr, log, flush)
	closeStreams := func() {
		outW.Close()
		errW.Close()
		readers.Wait()
	}

	// Attaching before the start is what guarantees no early line is lost;
	// Success hands control back once the daemon has accepted the attach.
	attached := make(chan struct{})
	stream, err := d.client.AttachToContainerNonBlocking(docker.AttachToContainerOptions{
		Container:    id,
		OutputStream: outW,
		ErrorStream:  errW,
		Stream:       true,
		Stdout:       true,
		Stderr:       true,
		Success:      attached,
	})
	if err != nil {
		closeStreams()
		return 0, fmt.Errorf("attach to container: %w", err)
	}
	<-attached
	attached <- struct{}{}

	startCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dockerOpTimeout)
	err = d.client.StartContainerWithContext(id, nil, startCtx)
	cancel()
	if err != nil {
		stream.Close()
		closeStreams()
		return 0, fmt.Errorf("start container: %w", err)
	}

	code, err := d.client.WaitContainerWithContext(id, ctx)
	if ctx.Err() != nil {
		code, err = d.stop(context.WithoutCancel(ctx), id)
	}

	// The attach stream ends when the container does; bound the wait anyway
	// so a daemon that keeps it open cannot hold the step. The time the
	// readers wait for room in the journal does not count: the stream
	// still holds the container's last lines then.
	drained := make(chan struct{})
	go func() { _ = stream.Wait(); close(drained) }()
	readers.Await(drained, runners.ReaderGrace, func() { stream.Close() })
	closeStreams()
	if err != nil {
		return 0, fmt.Errorf("wait for container: %w", err)
	}
	return code, nil
}

// stop stops a running container (SIGTERM, SIGKILL after the grace) and
// returns its exit code.
func (d *Runner) stop(ctx context.Context, id string) (int, error) {
	grace := uint(d.cfg.KillGrace / time.Second)
	stopCtx, cancel := context.WithTimeout(ctx, d.cfg.KillGrace+dockerOpTimeout)
	defer cancel()
	err := d.client.StopContainerWithContext(id, grace, stopCtx)
	var notRunning *docker.ContainerNotRunning
	if err != nil && !errors.As(err, &notRunning) {
		return 0, fmt.Errorf("stop container: %w", err)
	}
	return d.client.WaitContainerWithContext(id, stopCtx)
}

// remove deletes the container and its anonymous volumes, running or not.
func (d *Runner) remove(ctx context.Context, id string) {
	rmCtx, cancel := context.WithTimeout(ctx, dockerOpTimeout)
	defer cancel()
	err := d.client.RemoveContainer(docker.RemoveContainerOptions{
		ID: id, Force: true, RemoveVolumes: true, Context: rmCtx,
	})
	var gone *docker.NoSuchContainer
	if err != nil && !errors.As(err, &gone) {
		// The step's result is decided already; the label lets an operator
		// find what is left.
		d.cfg.Log.Warn("step container not removed", "container", id, "label", runners.LabelJobID, "err", err)
	}
}
