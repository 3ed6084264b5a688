package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() { Commands["jobs"] = cmdJobs }

// cmdJobs is `appliance jobs`: a page of jobs, newest first.
func cmdJobs(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("jobs", "appliance jobs [--workspace WS] [--task T] [--status S,S] [--source TYPE] [--limit N] [--cursor C | --offset N]", stdout, stderr)
	ws := cc.fs.String("workspace", "", "only jobs of this workspace")
	task := cc.fs.String("task", "", "only jobs of this task (its workspace is found when --workspace is not given)")
	limit := cc.fs.Int("limit", 50, "how many jobs to show")
	offset := cc.fs.Int("offset", 0, "how many of the newest jobs to pass over")
	status := cc.fs.String("status", "", "only jobs in one of these statuses (comma-separated: pending,running,completed,failed,cancelled,skipped)")
	source := cc.fs.String("source", "", "only jobs of this source type (api, user, trigger, webhook, hook, task)")
	cursor := cc.fs.String("cursor", "", "start after this cursor (printed under a page that has more)")
	queued := cc.fs.Bool("queued", false, "only the jobs waiting for a slot of a concurrency limit or queue, in line order")
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	if *limit < 1 || *offset < 0 {
		return cc.usageError("--limit must be at least 1 and --offset at least 0")
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		if *task != "" && *ws == "" {
			var err error
			if *ws, err = workspaceOf(ctx, c, *task); err != nil {
				return 1, err
			}
		}
		page, raw, err := c.Jobs(ctx, client.JobQuery{Workspace: *ws, TaskName: *task, Status: *status, SourceType: *source, Cursor: *cursor, Limit: *limit, Offset: *offset, Queued: *queued})
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
			return 0, nil
		}
		printJobs(stdout, page, *offset, *cursor != "", time.Now())
		return 0, nil
	})
}

// jobStatusText is the job's status, with its place in line while it
// waits for a slot: "pending, queued (3rd)".
func jobStatusText(j *wire.Job) string {
	switch {
	case j.Queue == nil:
		return j.Status
	case j.Queue.Position < 1: // it left the line as it was read
		return j.Status + ", queued"
	}
	return fmt.Sprintf("%s, queued (%s)", j.Status, ordinal(j.Queue.Position))
}

// ordinal writes 1 as 1st, 2 as 2nd, 11 as 11th, 23 as 23rd.
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// printJobs prints a page as a table; under it, where more pages are, the
// range shown and the flag that shows the next page (a cursor, which no
// job arriving meanwhile shifts).
func printJobs(w io.Writer, page *wire.JobList, offset int, afterCursor bool, now time.Time) {
	if len(page.Items) == 0 {
		switch {
		case afterCursor:
			fmt.Fprintln(w, "no more jobs")
		case page.Total > 0:
			fmt.Fprintf(w, "no jobs past the first %d (of %d)\n", offset, page.Total)
		default:
			fmt.Fprintln(w, "no jobs")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tTASK\tSTATUS\tSOURCE\tCREATED\tDURATION")
	for _, j := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.JobID, j.TaskName, jobStatusText(&j), j.SourceType, shortTime(j.CreatedAt), jobDuration(&j, now))
	}
	tw.Flush()
	switch {
	case page.NextCursor != nil && !afterCursor:
		fmt.Fprintf(w, "jobs %d-%d of %d; next page: --cursor %s\n", offset+1, offset+len(page.Items), page.Total, *page.NextCursor)
	case page.NextCursor != nil:
		fmt.Fprintf(w, "%d jobs of %d; next page: --cursor %s\n", len(page.Items), page.Total, *page.NextCursor)
	case offset > 0 && !afterCursor:
		fmt.Fprintf(w, "jobs %d-%d of %d\n", offset+1, offset+len(page.Items), page.Total)
	}
}
