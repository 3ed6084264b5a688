// Command appliance is a workflow orchestration service in one binary: the
// server (`serve`), a remote worker (`worker`) and a command-line client.
package main

import (
	"os"

	"github.com/appliance-sh/appliance/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
