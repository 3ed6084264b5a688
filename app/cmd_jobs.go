package app

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

func init() { commands["jobs"] = cmdJobs }

// cmdJobs is `appliance jobs`: a page of jobs, newest first.
func cmdJobs(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("jobs", "appliance jobs [--workspace WS] [--task T] [--limit N] [--offset N]", stdout, stderr)
	ws := cc.fs.String("workspace", "", "only jobs of this workspace")
	task := cc.fs.String("task", "", "only jobs of this task (its workspace is found when --workspace is not given)")
	limit := cc.fs.Int("limit", 50, "how many jobs to show")
	offset := cc.fs.Int("offset", 0, "how many of the newest jobs to pass over")
	if _, code, ok := cc.parse(args, 0); !ok {
		return code
	}
	if *limit < 1 || *offset < 0 {
		return cc.usageError("--limit must be at least 1 and --offset at least 0")
	}
	return cc.run(func(ctx context.Context, c *apiClient) (int, error) {
		if *task != "" && *ws == "" {
			var err error
			if *ws, err = c.workspaceOf(ctx, *task); err != nil {
				return 1, err
			}
		}
		q := url.Values{"limit": {strconv.Itoa(*limit)}, "offset": {strconv.Itoa(*offset)}}
		if *ws != "" {
			q.Set("workspace", *ws)
		}
		if *task != "" {
			q.Set("task_name", *task)
		}
		var page apiList[apiJob]
		raw, err := c.get(ctx, "/api/jobs?"+q.Encode(), &page)
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
			return 0, nil
		}
		printJobs(stdout, page, *offset, time.Now())
		return 0, nil
	})
}

func printJobs(w io.Writer, page apiList[apiJob], offset int, now time.Time) {
	if len(page.Items) == 0 {
		if page.Total > 0 {
			fmt.Fprintf(w, "no jobs past the first %d (of %d)\n", offset, page.Total)
		} else {
			fmt.Fprintln(w, "no jobs")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tTASK\tSTATUS\tSOURCE\tCREATED\tDURATION")
	for _, j := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.JobID, j.TaskName, j.Status, j.SourceType, shortTime(j.CreatedAt), j.duration(now))
	}
	tw.Flush()
	if shown := offset + len(page.Items); offset > 0 || shown < page.Total {
		fmt.Fprintf(w, "jobs %d-%d of %d (--limit, --offset for more)\n", offset+1, shown, page.Total)
	}
}
