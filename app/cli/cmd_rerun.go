package cli

import (
	"context"
	"io"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() { Commands["rerun"] = cmdRerun }

// cmdRerun is `appliance rerun JOB_ID`: a new job of the job's task on the
// current revision, with the old input unless --input or --input-json give
// one (then it replaces the old input whole, checked as for `run`). It
// prints the new job's id and, with --follow, its log and final status.
func cmdRerun(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("rerun", "appliance rerun JOB_ID [--from-failed] [--input k=v ...] [--input-json '{...}'] [--follow]", stdout, stderr)
	fromFailed := cc.fs.Bool("from-failed", false, "reuse the steps that completed (the job must have failed or been cancelled); the others run again")
	var inputs inputFlags
	cc.fs.Var(&inputs, "input", "input field `k=v`, repeatable (replaces the old input); v is read as JSON when it parses, else as a string")
	inputJSON := cc.fs.String("input-json", "", "the input as a JSON object (replaces the old input); --input fields override its keys")
	follow := cc.fs.Bool("follow", false, "stream the new job's log until it ends; exit 1 unless it completed")
	pos, code, ok := cc.parse(args, 1)
	if !ok {
		return code
	}
	body := wire.RerunRequest{FromFailed: *fromFailed}
	if len(inputs) > 0 || *inputJSON != "" {
		input, err := buildInput(*inputJSON, inputs)
		if err != nil {
			return cc.usageError("%v", err)
		}
		body.Input = input
	}
	id := pos[0]
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		created, raw, err := c.Rerun(ctx, id, body)
		if err != nil {
			return 1, err
		}
		return startedJob(ctx, c, cc, raw, created.JobID, *follow)
	})
}
