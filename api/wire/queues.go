package wire

import "time"

// JobQueue is a job's place in line while it waits for a slot of its
// task's concurrency limit or its queue (absent on a job that does not
// wait).
type JobQueue struct {
	Name     string     `json:"name"` // the server config queue ("" for the task's own limit only)
	Key      string     `json:"key"`  // the rendered concurrency key ("" without one)
	Position int        `json:"position"`
	Priority int        `json:"priority"`
	Since    *time.Time `json:"since"` // waiting since
}

// Queue is one limit of GET /api/queues: a named queue of the server
// config, or a task's concurrency limit for one key.
type Queue struct {
	Name      string     `json:"name"` // "" for a task's limit
	Workspace string     `json:"workspace,omitempty"`
	TaskName  string     `json:"task_name,omitempty"`
	Key       string     `json:"key"`
	Limit     int        `json:"limit"` // 0 = none
	Running   []QueueJob `json:"running"`
	Queued    []QueueJob `json:"queued"` // in line
}

// QueueJob is a job holding a slot of a queue, or waiting for one.
type QueueJob struct {
	JobID     string     `json:"job_id"`
	Workspace string     `json:"workspace"`
	TaskName  string     `json:"task_name"`
	Priority  int        `json:"priority"`
	Position  int        `json:"position,omitempty"` // in line, 1-based
	CreatedAt time.Time  `json:"created_at"`
	Since     *time.Time `json:"since,omitempty"` // waiting since
}

// QueueList is GET /api/queues.
type QueueList struct {
	Queues []Queue `json:"queues"`
}

// PriorityRequest is POST /api/jobs/{id}/priority.
type PriorityRequest struct {
	Priority *int `json:"priority"`
}
