package app

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/appliance-sh/appliance/runners/pod"
	"github.com/appliance-sh/appliance/runners/worker"
)

func init() { commands["fetch-workspace"] = cmdFetchWorkspace }

// cmdFetchWorkspace is a step pod's init container: it writes the step's
// input file (and inline script) and fetches its workspace revision with
// the step-bound token, all named by APPLIANCE_* variables the pod runner
// sets.
func cmdFetchWorkspace(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: appliance fetch-workspace (configured by the APPLIANCE_* environment of a step pod)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	init := pod.PodInitFromEnv(os.Getenv)
	if err := init.Prepare(ctx, worker.DefaultWorkspaceLimits); err != nil {
		fmt.Fprintln(stderr, "appliance fetch-workspace:", err)
		return 1
	}
	if init.Dir != "" {
		fmt.Fprintf(stdout, "workspace %s at revision %s fetched into %s\n", init.Workspace, init.Revision, init.Dir)
	}
	return 0
}
