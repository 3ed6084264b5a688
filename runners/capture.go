package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// Limits of the stderr tail quoted in a failed step's error.
const (
	tailLines = 20
	TailBytes = 4 << 10
)

// OutputPrefix begins the stdout line carrying a step's output object.
const OutputPrefix = "OUTPUT:"

// capture watches a step's output lines for its result: the last valid
// OUTPUT: line of stdout and the tail of stderr.
type capture struct {
	mu     sync.Mutex
	output map[string]any
	tail   []string
}

func (c *capture) line(stream, line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stream == Stderr {
		c.tail = append(c.tail, line)
		if len(c.tail) > tailLines {
			c.tail = c.tail[len(c.tail)-tailLines:]
		}
		return
	}
	if out, ok := parseOutput(line); ok {
		c.output = out
	}
}

// parseOutput reads an `OUTPUT: {...}` line; anything that is not a JSON
// object after the prefix is ordinary output.
func parseOutput(line string) (map[string]any, bool) {
	rest, ok := strings.CutPrefix(line, OutputPrefix)
	if !ok {
		return nil, false
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "{") {
		return nil, false
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(rest), &out); err != nil {
		return nil, false
	}
	return out, true
}

// stderrTail is the captured stderr tail, at most TailBytes long.
func (c *capture) stderrTail() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := strings.Join(c.tail, "\n")
	if len(s) > TailBytes {
		s = s[len(s)-TailBytes:]
		// Cut at a line start so the tail does not begin mid-line.
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return s
}

// Execute runs a step with r and turns what happened into the result a worker
// reports. Killing is signalled through ctx: its cause (see
// context.WithCancelCause) becomes the step's error, so a timeout reads
// "Step timed out after 5s" rather than "context canceled".
func Execute(ctx context.Context, r Runner, step *Step) Result {
	if step.Log == nil {
		return Failed(1, ErrNoLog.Error())
	}
	c := &capture{}
	sink := step.Log
	s := *step
	s.Log = func(stream, line string) {
		c.line(stream, line)
		sink(stream, line)
	}
	code, err := r.Run(ctx, &s)
	if ctx.Err() != nil {
		if code == 0 {
			code = ExitKilled
		}
		return Failed(code, context.Cause(ctx).Error())
	}
	if err != nil {
		if code == 0 {
			code = 1
		}
		return Failed(code, err.Error())
	}
	if code != 0 {
		msg := fmt.Sprintf("Exit code: %d", code)
		if tail := c.stderrTail(); tail != "" {
			msg += "\n" + tail
		}
		return Failed(code, msg)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Result{Output: c.output}
}

// ExitKilled is the exit code reported for a step killed before it exited
// on its own (128 + SIGKILL, as shells report it).
const ExitKilled = 137

// Failed is the result of a step that failed with code and msg.
func Failed(code int, msg string) Result {
	return Result{ExitCode: code, Error: &msg}
}

// Reasons a step is killed, carried as the cause of its context.
var (
	ErrStepCancelled = errors.New("Step cancelled: the job was cancelled")
	ErrShuttingDown  = errors.New("worker shutting down")
	// ErrConsumerStopped stops an event source's consumer step at once
	// when its worker stops (the server starts the consumer again).
	ErrConsumerStopped = errors.New("worker shutting down: an event source consumer is stopped at once, the server starts it again")
)

// TimeoutError is the cause of a step killed at its deadline.
func TimeoutError(secs float64) error {
	return fmt.Errorf("Step timed out after %ss", formatSecs(secs))
}

func formatSecs(secs float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", secs), "0"), ".")
}
