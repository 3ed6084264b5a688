package cli

import (
	"fmt"
	"io"

	"github.com/appliance-sh/appliance/engine/workspace"
)

func init() { Commands["schema"] = cmdSchema }

// cmdSchema prints the JSON Schema of the workflow format, for editors.
func cmdSchema(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: appliance schema")
		return 2
	}
	if _, err := stdout.Write(workspace.JSONSchema()); err != nil {
		fmt.Fprintf(stderr, "appliance schema: %v\n", err)
		return 1
	}
	return 0
}
