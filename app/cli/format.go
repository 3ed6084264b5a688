package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/api/client"
	"github.com/appliance-sh/appliance/api/wire"
)

// jobDuration is how long the job ran, or has run so far; "-" before it
// started.
func jobDuration(j *wire.Job, now time.Time) string {
	start := j.StartedAt
	if start == nil {
		if j.CompletedAt == nil {
			return "-"
		}
		// Ended without starting: cancelled while pending, or all skipped.
		start = &j.CreatedAt
	}
	end := now
	if j.CompletedAt != nil {
		end = *j.CompletedAt
	}
	return shortDuration(end.Sub(*start))
}

// shortDuration is a duration to a precision a person reads: 350ms, 12.4s, 3m07s.
func shortDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// shortTime is a timestamp in local time, to the second.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// workspaceOf picks the workspace a command means when --workspace is not
// given: the server's only one, else the only one that has the task.
func workspaceOf(ctx context.Context, c *client.Client, task string) (string, error) {
	all, _, err := c.Workspaces(ctx)
	if err != nil {
		return "", err
	}
	switch len(all) {
	case 0:
		return "", fmt.Errorf("the server has no workspaces")
	case 1:
		return all[0].Name, nil
	}
	var names, holders []string
	for _, ws := range all {
		names = append(names, ws.Name)
		tasks, _, err := c.Tasks(ctx, ws.Name)
		if err != nil {
			return "", err
		}
		for _, t := range tasks {
			if t.Name == task {
				holders = append(holders, ws.Name)
			}
		}
	}
	sort.Strings(names)
	switch len(holders) {
	case 0:
		return "", fmt.Errorf("no task %q in any workspace (%s)", task, strings.Join(names, ", "))
	case 1:
		return holders[0], nil
	}
	return "", fmt.Errorf("task %q is in several workspaces (%s): choose one with --workspace", task, strings.Join(holders, ", "))
}
