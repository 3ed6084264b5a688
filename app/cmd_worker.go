package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	units "github.com/docker/go-units"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/worker"
)

func init() { commands["worker"] = runWorker }

// runWorker is `appliance worker --config worker-config.yaml`.
func runWorker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFlag := fs.String("config", "", "worker config file (default $APPLIANCE_CONFIG)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// SIGINT/SIGTERM begin a graceful drain; running steps may finish.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return WorkerMain(ctx, config.Path(*configFlag), stdout, stderr)
}

// WorkerMain runs a remote worker until ctx ends and returns the exit code
// (`appliance worker`, which the system tests also run in their process).
func WorkerMain(ctx context.Context, configFile string, stdout, stderr io.Writer) int {
	cfg, err := config.LoadWorker(configFile)
	if err != nil {
		fmt.Fprintln(stderr, "appliance worker:", err)
		return 2
	}
	printWorkerSettings(stdout, cfg)

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	spool, err := worker.OpenSpool(cfg.SpoolDir, cfg.SpoolMax, log)
	if err != nil {
		fmt.Fprintln(stderr, "appliance worker:", err)
		return 2
	}
	defer spool.Close()
	client := worker.NewClient(cfg.ServerURL, cfg.Token, nil, worker.WithServerURLs(cfg.ServerURLs...),
		worker.WithWorkspaceCache(cfg.WorkspaceCacheDir), worker.WithWorkspaceLimits(cfg.WorkspaceLimits))
	wcfg := worker.Config{
		Name:              cfg.Name,
		Tags:              cfg.Tags,
		MaxConcurrent:     cfg.MaxConcurrent,
		HeartbeatInterval: cfg.HeartbeatInterval,
		LogPushInterval:   cfg.LogPushInterval,
		DrainTimeout:      cfg.DrainTimeout,
		RetryMin:          cfg.RetryMinInterval,
		RetryMax:          cfg.RetryMaxInterval,
		Spool:             spool,
	}
	if err := detectRunners(ctx, cfg.Docker, cfg.Kubernetes, cfg.ServerURL, &wcfg, log); err != nil {
		fmt.Fprintln(stderr, "appliance worker:", err)
		return 2
	}
	fmt.Fprintf(stdout, "  detected tags:       %s (runners: %s)\n", describeTags(wcfg.Tags), strings.Join(runnerNames(wcfg.Runners), ", "))
	w := worker.New(client, wcfg, log)
	if err := w.Run(ctx); err != nil {
		if errors.Is(err, worker.ErrUnauthorized) {
			fmt.Fprintln(stderr, "appliance worker: worker token rejected by server: worker_token must equal the server's worker_token")
		} else {
			fmt.Fprintln(stderr, "appliance worker:", err)
		}
		return 1
	}
	return 0
}

// printWorkerSettings shows the effective settings at start-up, never the token.
func printWorkerSettings(w io.Writer, cfg *config.Worker) {
	tags := "(none)"
	if len(cfg.Tags) > 0 {
		tags = strings.Join(cfg.Tags, ", ")
	}
	fmt.Fprintf(w, `appliance worker
  server_url:          %s
  worker_name:         %s
  tags:                %s
  max_concurrent:      %d
  workspace_cache_dir: %s
  heartbeat_interval:  %s
  log_push_interval:   %s
  drain_timeout:       %s
  retry_min_interval:  %s
  retry_max_interval:  %s
  spool_dir:           %s
  spool_max:           %s
  workspace_limits:    total_size %s, files %d, file_size %s, ratio %d:1
`, strings.Join(append([]string{cfg.ServerURL}, cfg.ServerURLs...), ", "), cfg.Name, tags, cfg.MaxConcurrent, cfg.WorkspaceCacheDir,
		cfg.HeartbeatInterval, cfg.LogPushInterval, cfg.DrainTimeout,
		cfg.RetryMinInterval, cfg.RetryMaxInterval, cfg.SpoolDir, units.BytesSize(float64(cfg.SpoolMax)),
		units.BytesSize(float64(cfg.WorkspaceLimits.TotalSize)), cfg.WorkspaceLimits.Files,
		units.BytesSize(float64(cfg.WorkspaceLimits.FileSize)), cfg.WorkspaceLimits.Ratio)
}

func describeTags(tags []string) string {
	if len(tags) == 0 {
		return "(none)"
	}
	return strings.Join(tags, ", ")
}

// runnerNames lists a worker's runners, the local one always among them.
func runnerNames(rs map[string]runners.Runner) []string {
	names := []string{"local"}
	for n := range rs {
		if n != "local" {
			names = append(names, n)
		}
	}
	sort.Strings(names[1:])
	return names
}
