package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/engine/workspace"
)

func init() { Commands["validate"] = cmdValidate }

// cmdValidate checks a workspace directory: every problem on its own line
// and exit 1, or its warnings (a `raw` script value from an input, an
// output or an event) and a one-line summary and exit 0. Usage errors
// exit 2.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(stderr, "usage: appliance validate DIR")
		return 2
	}
	dir := args[0]
	ws, err := workspace.Load(filepath.Base(filepath.Clean(dir)), dir, nil)
	var problems workflow.Errors
	switch {
	case errors.As(err, &problems):
		for _, p := range problems {
			fmt.Fprintln(stdout, p.Error())
		}
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "appliance validate: %v\n", err)
		return 1
	}
	// Warnings do not fail the check: the author may mean them.
	for _, w := range ws.Warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w.Error())
	}
	fmt.Fprintf(stdout, "%s, %s, %s: ok\n",
		plural(len(ws.Tasks), "task"), plural(len(ws.Actions), "action"), plural(len(ws.Triggers), "trigger"))
	return 0
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
