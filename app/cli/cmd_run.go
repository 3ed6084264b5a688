package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

func init() { Commands["run"] = cmdRun }

// inputFlags collects repeated --input k=v flags.
type inputFlags []string

func (f *inputFlags) String() string     { return strings.Join(*f, " ") }
func (f *inputFlags) Set(v string) error { *f = append(*f, v); return nil }

// cmdRun is `appliance run TASK`: it executes the task, prints the job id
// and, with --follow, the job's log and its final status.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	cc := newClientCommand("run", "appliance run TASK [--workspace WS] [--input k=v ...] [--input-json '{...}'] [--follow | --local [--worker-token T]]", stdout, stderr)
	ws := cc.fs.String("workspace", "", "workspace of the task (default: the only one holding it)")
	var inputs inputFlags
	cc.fs.Var(&inputs, "input", "input field `k=v`, repeatable; v is read as JSON when it parses (42, true, {...}), else as a string")
	inputJSON := cc.fs.String("input-json", "", "the input as a JSON object; --input fields override its keys")
	follow := cc.fs.Bool("follow", false, "stream the job's log until it ends; exit 0 if it completed, 1 if it failed, 130 if it was cancelled")
	local := cc.fs.Bool("local", false, "run the whole job on this machine, with this machine's runners, recorded on the server as a job with source_type local (needs the worker token)")
	token := cc.fs.String("worker-token", os.Getenv("APPLIANCE_WORKER_TOKEN"), "with --local: the server's worker_token (default $APPLIANCE_WORKER_TOKEN)")
	pos, code, ok := cc.parse(args, 1)
	if !ok {
		return code
	}
	input, err := buildInput(*inputJSON, inputs)
	if err != nil {
		return cc.usageError("%v", err)
	}
	task := pos[0]
	if *local {
		if *follow {
			return cc.usageError("--follow and --local do not go together: --local always shows the job's output")
		}
		if *token == "" {
			return cc.usageError("--local needs the server's worker token: --worker-token or APPLIANCE_WORKER_TOKEN")
		}
		return runLocal(cc, *ws, task, input, *token)
	}
	return cc.run(func(ctx context.Context, c *client.Client) (int, error) {
		if *ws == "" {
			if *ws, err = workspaceOf(ctx, c, task); err != nil {
				return 1, err
			}
		}
		created, raw, err := c.Execute(ctx, *ws, task, input)
		if err != nil {
			return 1, err
		}
		return startedJob(ctx, c, cc, raw, created.JobID, *follow)
	})
}

// startedJob prints the id of a job a command started (or the raw answer
// with --json) and, with --follow, follows it to its end.
func startedJob(ctx context.Context, c *client.Client, cc *clientCommand, raw []byte, jobID string, follow bool) (int, error) {
	if *cc.json {
		cc.printJSON(raw)
	} else {
		fmt.Fprintln(cc.stdout, jobID)
	}
	if !follow {
		return 0, nil
	}
	return followJob(ctx, c, cc, jobID)
}

// followJob prints the job's log until it ends, then its final status; the
// exit code says whether it completed.
func followJob(ctx context.Context, c *client.Client, cc *clientCommand, jobID string) (int, error) {
	if err := followJobLog(ctx, c, jobID, &logPrinter{w: cc.stdout, raw: *cc.json}); err != nil {
		return 1, err
	}
	job, raw, err := c.Job(ctx, jobID)
	if err != nil {
		return 1, err
	}
	if *cc.json {
		cc.printJSON(raw)
	} else {
		printOutcome(cc.stdout, job)
	}
	return jobExitCode(job.Status), nil
}

// Exit codes of a followed job (run --follow, logs --follow): 0 when it
// completed, 1 when it failed (or ended any other way), 130 when it was
// cancelled, as a shell reports a command stopped by Ctrl-C.
const (
	exitJobFailed    = 1
	exitJobCancelled = 130
)

// jobExitCode is the exit code for a followed job that ended with status.
func jobExitCode(status string) int {
	switch status {
	case "completed":
		return 0
	case "cancelled":
		return exitJobCancelled
	}
	return exitJobFailed
}

// printOutcome says how the job ended and, when it failed, why.
func printOutcome(w io.Writer, j *wire.JobDetail) {
	if !wire.Terminal(j.Status) {
		fmt.Fprintf(w, "job %s is still %s\n", j.JobID, j.Status)
		return
	}
	fmt.Fprintf(w, "job %s %s in %s\n", j.JobID, j.Status, jobDuration(&j.Job, time.Now()))
	for _, s := range j.Steps {
		if s.Status != "failed" || s.ErrorMessage == nil {
			continue
		}
		msg := strings.ReplaceAll(strings.TrimRight(*s.ErrorMessage, "\n"), "\n", "\n    ")
		fmt.Fprintf(w, "  step %s failed: %s\n", s.StepName, msg)
	}
}

// buildInput merges --input-json and the --input k=v fields. A value is
// JSON when it parses as JSON (numbers, booleans, objects, quoted strings),
// else the string as typed: `name=Ada` and `count=3` both mean what they say.
func buildInput(inputJSON string, fields []string) (map[string]any, error) {
	input := map[string]any{}
	if strings.TrimSpace(inputJSON) != "" {
		if err := decodeExact(inputJSON, &input); err != nil || input == nil {
			return nil, fmt.Errorf("--input-json must be a JSON object: %q", inputJSON)
		}
	}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--input %q: want key=value", f)
		}
		var parsed any
		if err := decodeExact(v, &parsed); err == nil {
			input[k] = parsed
		} else {
			input[k] = v
		}
	}
	return input, nil
}

// decodeExact decodes s as exactly one JSON value, keeping numbers as
// written so a long id survives the round trip.
func decodeExact(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}
