package cli

import (
	"context"
	"io"

	"github.com/appliance-sh/appliance/api/client"
)

func init() { Commands["logs"] = cmdLogs }

// cmdLogs is `appliance logs JOB_ID`: the job's log so far (or its last
// --tail lines) or, with --follow, as it grows until the job ends.
func cmdLogs(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("logs", "appliance logs JOB_ID [--step S] [--tail N] [--follow]", stdout, stderr)
	step := cc.fs.String("step", "", "only this step's lines (_server: the server's own)")
	follow := cc.fs.Bool("follow", false, "keep streaming until the job ends; exit 0 if it completed, 1 if it failed, 130 if it was cancelled")
	tail := cc.fs.Int("tail", 0, "only the last N lines (with --follow: start N lines of the job's log before its end)")
	pos, code, ok := cc.parse(args, 1)
	if !ok {
		return code
	}
	if *tail < 0 {
		return cc.usageError("--tail must be a positive number of lines, got %d", *tail)
	}
	id := pos[0]
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		p := &logPrinter{w: stdout, step: *step, raw: *cc.json}
		if *follow {
			if err := followJobLogTail(ctx, c, id, *tail, p); err != nil {
				return 1, err
			}
			job, _, err := c.Job(ctx, id)
			if err != nil {
				return 1, err
			}
			return jobExitCode(job.Status), nil
		}
		answer, raw, err := c.Logs(ctx, id, client.LogQuery{Step: *step, Tail: *tail})
		if err != nil {
			return 1, err
		}
		if *cc.json {
			cc.printJSON(raw)
			return 0, nil
		}
		p.write([]byte(answer.Logs))
		p.flush()
		return 0, nil
	})
}
