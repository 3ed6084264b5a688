package app

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// The API's answers, as far as the client commands read them.

type apiWorkspace struct {
	Name   string   `json:"name"`
	Errors []string `json:"errors"`
}

type apiTask struct {
	Name        string `json:"name"`
	Workspace   string `json:"workspace"`
	Folder      string `json:"folder"`
	HasTriggers bool   `json:"has_triggers"`
}

type apiJob struct {
	JobID       string     `json:"job_id"`
	Workspace   string     `json:"workspace"`
	TaskName    string     `json:"task_name"`
	Status      string     `json:"status"`
	SourceType  string     `json:"source_type"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Steps       []apiStep  `json:"steps"`
}

type apiStep struct {
	StepName     string  `json:"step_name"`
	Status       string  `json:"status"`
	ErrorMessage *string `json:"error_message"`
}

type apiWorker struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Tags     []string  `json:"tags"`
	Status   string    `json:"status"`
	LastSeen time.Time `json:"last_seen"`
}

type apiList[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
}

// terminal reports whether a job status is final.
func terminal(status string) bool {
	switch status {
	case "completed", "failed", "cancelled", "skipped":
		return true
	}
	return false
}

// duration is how long the job ran, or has run so far; "-" before it
// started.
func (j *apiJob) duration(now time.Time) string {
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

func (c *apiClient) workspaces(ctx context.Context) ([]apiWorkspace, error) {
	var ws []apiWorkspace
	_, err := c.get(ctx, "/api/workspaces", &ws)
	return ws, err
}

func (c *apiClient) tasks(ctx context.Context, ws string) ([]apiTask, []byte, error) {
	var tasks []apiTask
	raw, err := c.get(ctx, "/api/workspaces/"+url.PathEscape(ws)+"/tasks", &tasks)
	return tasks, raw, err
}

func (c *apiClient) job(ctx context.Context, id string) (*apiJob, []byte, error) {
	var j apiJob
	raw, err := c.get(ctx, "/api/jobs/"+url.PathEscape(id), &j)
	if err != nil {
		return nil, nil, err
	}
	return &j, raw, nil
}

// workspaceOf picks the workspace a command means when --workspace is not
// given: the server's only one, else the only one that has the task.
func (c *apiClient) workspaceOf(ctx context.Context, task string) (string, error) {
	all, err := c.workspaces(ctx)
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
		tasks, _, err := c.tasks(ctx, ws.Name)
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
