package worker

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// Local execution mode: the worker creates a job it holds whole, claims
// only that job's steps and completes the job at the end.

// CreateLocalJob creates a job of task held by workerID and returns its id.
func (c *Client) CreateLocalJob(ctx context.Context, workerID, workspace, task string, input map[string]any) (string, error) {
	if input == nil {
		input = map[string]any{}
	}
	var out workerproto.LocalJobCreated
	err := c.call(ctx, workerID, "create local job", http.MethodPost, "/worker/jobs", nil, requestTimeout,
		workerproto.LocalJob{WorkerID: workerID, Workspace: workspace, Task: task, Input: input}, &out)
	return out.JobID, err
}

// ClaimJob long-polls for a ready step of a local job the worker holds; nil
// without error means none yet, ErrConflict that the job has ended.
func (c *Client) ClaimJob(ctx context.Context, workerID, jobID string) (*Assignment, error) {
	q := url.Values{"wait": {strconv.Itoa(int(claimWait / time.Second))}}
	var a Assignment
	err := c.call(ctx, workerID, "claim", http.MethodPost, "/worker/jobs/claim", q, claimWait+requestTimeout,
		workerproto.Claim{WorkerID: workerID, Tags: []string{}, JobID: jobID}, &a)
	if err != nil {
		return nil, err
	}
	if a.JobID == "" {
		return nil, nil
	}
	return &a, nil
}

// CompleteJob ends a local job the worker holds and returns its status.
func (c *Client) CompleteJob(ctx context.Context, workerID, jobID string) (string, error) {
	var out workerproto.JobCompleted
	err := c.call(ctx, workerID, "complete job", http.MethodPost, "/worker/jobs/"+url.PathEscape(jobID)+"/complete", nil, requestTimeout,
		workerproto.JobDone{WorkerID: workerID}, &out)
	return out.JobStatus, err
}
