// Package cli is the binary's client commands (login, run, jobs, logs,
// cancel, rerun, tasks, workers) over the typed API client api/client, and
// its local ones (validate, schema); app's Main dispatches to Commands.
// It must not import store, api, api/dispatch, app or app/config: it speaks
// to a server only through api/client.
package cli

import (
	"context"
	"io"
	"log/slog"

	"github.com/appliance-sh/appliance/runners/worker"
)

// Commands maps a command name to its implementation.
var Commands = map[string]func(args []string, stdout, stderr io.Writer) int{}

// DetectRunners fills in the runners `run --local` may use on this machine
// for the server at serverURL (Docker, pods) as a worker with no
// configuration does; app sets it.
var DetectRunners func(ctx context.Context, serverURL string, cfg *worker.Config, log *slog.Logger) error

// Hostname names this machine's local worker; app sets it.
var Hostname func() string
