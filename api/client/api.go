package client

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/appliance-sh/appliance/api/wire"
)

// The typed calls return the decoded answer and the raw one, as the server
// sent it, for callers that print it (the CLI's --json).

// Workspaces lists the server's workspaces (GET /api/workspaces).
func (c *Client) Workspaces(ctx context.Context) ([]wire.Workspace, json.RawMessage, error) {
	var ws []wire.Workspace
	raw, err := c.Get(ctx, "/api/workspaces", &ws)
	return ws, raw, err
}

// Tasks lists a workspace's tasks (GET /api/workspaces/{ws}/tasks).
func (c *Client) Tasks(ctx context.Context, workspace string) ([]wire.Task, json.RawMessage, error) {
	var tasks []wire.Task
	raw, err := c.Get(ctx, "/api/workspaces/"+url.PathEscape(workspace)+"/tasks", &tasks)
	return tasks, raw, err
}

// Execute starts a job of the task with this input
// (POST /api/workspaces/{ws}/tasks/{name}/execute).
func (c *Client) Execute(ctx context.Context, workspace, task string, input map[string]any) (*wire.JobCreated, json.RawMessage, error) {
	var created wire.JobCreated
	path := "/api/workspaces/" + url.PathEscape(workspace) + "/tasks/" + url.PathEscape(task) + "/execute"
	// One key for every attempt: a retry after a failover answers the job
	// the first attempt made, if it made one.
	raw, err := c.send(ctx, http.MethodPost, path, wire.ExecuteRequest{Input: input},
		http.Header{"Idempotency-Key": {newIdempotencyKey()}})
	if err != nil {
		return nil, nil, err
	}
	if err := Decode(raw, &created); err != nil {
		return nil, nil, fmt.Errorf("POST %s: %w", path, err)
	}
	return &created, raw, nil
}

// Job is a job's detail with its steps (GET /api/jobs/{id}).
func (c *Client) Job(ctx context.Context, id string) (*wire.JobDetail, json.RawMessage, error) {
	var j wire.JobDetail
	raw, err := c.Get(ctx, "/api/jobs/"+url.PathEscape(id), &j)
	if err != nil {
		return nil, nil, err
	}
	return &j, raw, nil
}

// JobQuery filters and pages GET /api/jobs; zero fields are not sent.
type JobQuery struct {
	Workspace  string
	TaskName   string
	Status     string // comma-separated
	SourceType string
	Cursor     string
	Limit      int
	Offset     int
	Queued     bool // only the jobs waiting for a slot, in line order
}

func (q JobQuery) values() url.Values {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Queued {
		v.Set("queued", "true")
	}
	for k, s := range map[string]string{"workspace": q.Workspace, "task_name": q.TaskName, "status": q.Status, "source_type": q.SourceType, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Queues lists the queues and task limits in use (GET /api/queues).
func (c *Client) Queues(ctx context.Context) (*wire.QueueList, error) {
	var out wire.QueueList
	if _, err := c.Get(ctx, "/api/queues", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Jobs is a page of the job list (GET /api/jobs).
func (c *Client) Jobs(ctx context.Context, q JobQuery) (*wire.JobList, json.RawMessage, error) {
	var page wire.JobList
	path := "/api/jobs"
	if v := q.values(); len(v) > 0 {
		path += "?" + v.Encode()
	}
	raw, err := c.Get(ctx, path, &page)
	if err != nil {
		return nil, nil, err
	}
	return &page, raw, nil
}

// Cancel cancels a job (POST /api/jobs/{id}/cancel).
func (c *Client) Cancel(ctx context.Context, id string) (*wire.StatusAnswer, json.RawMessage, error) {
	var answer wire.StatusAnswer
	raw, err := c.Post(ctx, "/api/jobs/"+url.PathEscape(id)+"/cancel", nil, &answer)
	if err != nil {
		return nil, nil, err
	}
	return &answer, raw, nil
}

// Rerun starts a new job of the job's task (POST /api/jobs/{id}/rerun).
func (c *Client) Rerun(ctx context.Context, id string, req wire.RerunRequest) (*wire.JobCreated, json.RawMessage, error) {
	var created wire.JobCreated
	raw, err := c.Post(ctx, "/api/jobs/"+url.PathEscape(id)+"/rerun", req, &created)
	if err != nil {
		return nil, nil, err
	}
	return &created, raw, nil
}

// Approve answers a waiting approval step
// (POST /api/jobs/{id}/steps/{step}/approve).
func (c *Client) Approve(ctx context.Context, id, step string, req wire.ApproveRequest) (*wire.StatusAnswer, json.RawMessage, error) {
	var answer wire.StatusAnswer
	raw, err := c.Post(ctx, "/api/jobs/"+url.PathEscape(id)+"/steps/"+url.PathEscape(step)+"/approve", req, &answer)
	if err != nil {
		return nil, nil, err
	}
	return &answer, raw, nil
}

// LogQuery names the log GET .../logs reads: the job's, or one step's
// (Step), whole or its last Tail lines.
type LogQuery struct {
	Step string
	Tail int
}

// Logs is a job's log so far (GET /api/jobs/{id}/logs, or
// /api/jobs/{id}/steps/{step}/logs).
func (c *Client) Logs(ctx context.Context, jobID string, q LogQuery) (*wire.Logs, json.RawMessage, error) {
	path := "/api/jobs/" + url.PathEscape(jobID) + "/logs"
	if q.Step != "" {
		path = "/api/jobs/" + url.PathEscape(jobID) + "/steps/" + url.PathEscape(q.Step) + "/logs"
	}
	if q.Tail > 0 {
		path += "?tail=" + strconv.Itoa(q.Tail)
	}
	var logs wire.Logs
	raw, err := c.Get(ctx, path, &logs)
	if err != nil {
		return nil, nil, err
	}
	return &logs, raw, nil
}

// Workers is a page of the workers (GET /api/workers); limit 0 is the
// server's default.
func (c *Client) Workers(ctx context.Context, limit int) (*wire.List[wire.Worker], json.RawMessage, error) {
	path := "/api/workers"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var page wire.List[wire.Worker]
	raw, err := c.Get(ctx, path, &page)
	if err != nil {
		return nil, nil, err
	}
	return &page, raw, nil
}

// Config is GET /api/config.
func (c *Client) Config(ctx context.Context) (*wire.Config, json.RawMessage, error) {
	var cfg wire.Config
	raw, err := c.Get(ctx, "/api/config", &cfg)
	if err != nil {
		return nil, nil, err
	}
	return &cfg, raw, nil
}

// newIdempotencyKey is a random key for one execute and its retries.
func newIdempotencyKey() string { return "cli-" + rand.Text() }
