package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/appliance-sh/appliance/api/client"
)

func init() { Commands["workers"] = cmdWorkers }

// cmdWorkers is `appliance workers`: every worker the server knows, the
// in-process ones included.
func cmdWorkers(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("workers", "appliance workers", stdout, stderr)
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		page, raw, err := c.Workers(ctx, 500)
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
			return 0, nil
		}
		if len(page.Items) == 0 {
			fmt.Fprintln(stdout, "no workers")
			return 0, nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tTAGS\tLAST SEEN")
		for _, w := range page.Items {
			tags := strings.Join(w.Tags, ",")
			if tags == "" {
				tags = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.ID, w.Name, w.Status, tags, shortTime(w.LastSeen))
		}
		tw.Flush()
		if len(page.Items) < page.Total {
			fmt.Fprintf(stdout, "%d of %d workers shown\n", len(page.Items), page.Total)
		}
		return 0, nil
	})
}
