package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() { Commands["tasks"] = cmdTasks }

// cmdTasks is `appliance tasks`: the tasks of one workspace, or of each
// when the server has several and none is chosen.
func cmdTasks(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("tasks", "appliance tasks [--workspace WS]", stdout, stderr)
	ws := cc.fs.String("workspace", "", "workspace to list (default: every one)")
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		names := []string{*ws}
		if *ws == "" {
			all, _, err := c.Workspaces(ctx)
			if err != nil {
				return 1, err
			}
			if len(all) == 0 {
				return 1, fmt.Errorf("the server has no workspaces")
			}
			names = names[:0]
			for _, w := range all {
				names = append(names, w.Name)
			}
		}
		// --json over several workspaces is one array: every task
		// summary names its workspace.
		everything := []json.RawMessage{}
		for i, name := range names {
			tasks, raw, err := c.Tasks(ctx, name)
			switch {
			case err != nil:
				return 1, err
			case *cc.json && len(names) == 1:
				cc.printJSON(raw)
			case *cc.json:
				var items []json.RawMessage
				if err := json.Unmarshal(raw, &items); err != nil {
					return 1, fmt.Errorf("tasks of workspace %s: %w", name, err)
				}
				everything = append(everything, items...)
			case len(names) == 1:
				printTasks(stdout, tasks)
			default:
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				fmt.Fprintf(stdout, "workspace %s:\n", name)
				printTasks(stdout, tasks)
			}
		}
		if *cc.json && len(names) > 1 {
			out, err := json.Marshal(everything)
			if err != nil {
				return 1, fmt.Errorf("encode tasks: %w", err)
			}
			cc.printJSON(out)
		}
		return 0, nil
	})
}

func printTasks(w io.Writer, tasks []wire.Task) {
	if len(tasks) == 0 {
		fmt.Fprintln(w, "no tasks")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tFOLDER\tTRIGGERS")
	for _, t := range tasks {
		folder, triggers := t.Folder, "no"
		if folder == "" {
			folder = "-"
		}
		if t.HasTriggers {
			triggers = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, folder, triggers)
	}
	tw.Flush()
}
