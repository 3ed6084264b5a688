package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/appliance-sh/appliance/api/client"
)

func init() { Commands["cancel"] = cmdCancel }

// cmdCancel is `appliance cancel JOB_ID`. Cancelling a job that has
// already ended is an error (409), so a script learns it did nothing.
func cmdCancel(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("cancel", "appliance cancel JOB_ID", stdout, stderr)
	pos, code, ok := cc.parse(args, 1)
	if !ok {
		return code
	}
	id := pos[0]
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		_, raw, err := c.Cancel(ctx, id)
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
		} else {
			fmt.Fprintf(stdout, "cancelled %s\n", id)
		}
		return 0, nil
	})
}
