// Command appliance is a workflow orchestration service in one binary: the
// server (`serve`), a remote worker (`worker`) and a command-line client.
// It imports only app and runners/local: everything else is the wiring's.
package main

import (
	"os"

	"github.com/appliance-sh/appliance/app"
	"github.com/appliance-sh/appliance/runners/local"
)

func main() {
	// First of all: this binary may have been started as a step keeper.
	local.StepKeeperMain()
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
