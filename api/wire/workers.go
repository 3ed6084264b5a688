package wire

import "time"

// Worker is a worker as GET /api/workers lists it.
type Worker struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Tags     []string  `json:"tags"`
	Status   string    `json:"status"`
	LastSeen time.Time `json:"last_seen"`
}

// WorkerDetail is GET /api/workers/{id}: the worker and a page of the
// steps it ran.
type WorkerDetail struct {
	Worker
	Steps List[WorkerStep] `json:"steps"`
}

// WorkerStep is a step a worker ran, with its job's names.
type WorkerStep struct {
	JobID        string     `json:"job_id"`
	Workspace    string     `json:"workspace"`
	TaskName     string     `json:"task_name"`
	JobStatus    string     `json:"job_status"`
	StepName     string     `json:"step_name"`
	ActionType   string     `json:"action_type"`
	Status       string     `json:"status"`
	StartedAt    *time.Time `json:"started_at"`
	CompletedAt  *time.Time `json:"completed_at"`
	ErrorMessage *string    `json:"error_message"`
}
