// Package app wires the appliance together: configuration, the commands of
// the binary, start-up and graceful shutdown.
// It alone may import every package; nothing outside app imports it.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/appliance-sh/appliance/app/cli"
	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/runners/worker"
)

// Main runs the command named by args[0] and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		cmd, ok = cli.Commands[args[0]]
	}
	if !ok {
		fmt.Fprintf(stderr, "appliance: unknown command %q\n\n%s\n", args[0], usage)
		return 2
	}
	return cmd(args[1:], stdout, stderr)
}

const usage = `usage: appliance <command> [arguments]

commands:
  serve       run the server (defaults: 127.0.0.1:8080, ./data, workspace ./examples)
  worker      run a remote worker (--config worker-config.yaml)
  migrate     bring a PostgreSQL database (storage.type: postgres) to this binary's schema, as serve does
              at start-up: appliance migrate --config FILE [--dry-run] (--dry-run prints what would run)
  export      write a stopped server's whole state as JSON lines: appliance export --config FILE > dump.jsonl
  import      read a dump into an empty store (bbolt or PostgreSQL): appliance import --config FILE [--in dump.jsonl]
  audit       the audit trail: appliance audit list|export [filters] (through the API, admins), or
              appliance audit verify (--config FILE | --server URL | --file audit.jsonl) [--head SEQ:MAC]
  validate    check a workspace directory: appliance validate DIR
  schema      print the JSON Schema of the workflow format
  fetch-workspace  a step pod's init container (set up by the pod runner)

client commands (--server URL, default $APPLIANCE_SERVER or http://127.0.0.1:8080;
they use the login stored by "appliance login", or $APPLIANCE_TOKEN when it is set;
--json prints the raw answer):
  login       sign in to a server: appliance login [--server URL] [--api-key KEY|-]
  logout      revoke and forget the stored login: appliance logout [--server URL]
  run         run a task: appliance run TASK [--workspace WS] [--input k=v ...] [--input-json '{...}'] [--follow]
              or on this machine: appliance run --local TASK [...] (worker token: --worker-token or $APPLIANCE_WORKER_TOKEN)
  jobs        list jobs: appliance jobs [--workspace WS] [--task T] [--limit N] [--offset N]
  logs        print a job's log: appliance logs JOB_ID [--step S] [--follow]
  cancel      cancel a running job: appliance cancel JOB_ID
  rerun       run a job's task again: appliance rerun JOB_ID [--from-failed] [--input k=v ...] [--follow]
  tasks       list the tasks: appliance tasks [--workspace WS]
  workers     list the workers and when they were last seen`

// commands maps a command name to its implementation: the server's and
// the worker's here, the client commands in cli.Commands.
var commands = map[string]func(args []string, stdout, stderr io.Writer) int{}

func init() {
	// `run --local` finds this machine's runners as a worker with no
	// configuration does.
	cli.DetectRunners = func(ctx context.Context, serverURL string, cfg *worker.Config, log *slog.Logger) error {
		return detectRunners(ctx, config.Docker{}, nil, serverURL, cfg, log)
	}
	cli.Hostname = hostname
}
