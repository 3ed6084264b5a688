package wire

import "time"

// Job is a job as the lists show it (GET /api/jobs), and the head of its
// detail. Every timestamp is in UTC; internal fields (ready_at,
// required_tags, seq) never leak.
type Job struct {
	JobID       string     `json:"job_id"`
	Workspace   string     `json:"workspace"`
	TaskName    string     `json:"task_name"`
	Mode        string     `json:"mode"`
	Status      string     `json:"status"`
	SourceType  string     `json:"source_type"`
	SourceID    *string    `json:"source_id"`
	Revision    string     `json:"revision"`
	CreatedAt   time.Time  `json:"created_at"`
	StartedAt   *time.Time `json:"started_at"`
	CompletedAt *time.Time `json:"completed_at"`
	// Beyond the interface: the job this one re-runs.
	RerunOf string `json:"rerun_of,omitempty"`
	// Beyond the interface: the job's place in line while it waits for a
	// slot of a concurrency limit or queue (status pending); absent
	// otherwise, so the interface's own answers keep their exact keys.
	Queue *JobQueue `json:"queue,omitempty"`
}

// JobHead is the job detail without its steps, which the server streams
// after it.
type JobHead struct {
	Job
	Input  map[string]any `json:"input"`
	Output map[string]any `json:"output"`
	// Beyond the interface: the count of step records per status, and how
	// many for_each instances a big job's detail leaves out.
	StepsSummary map[string]int `json:"steps_summary"`
	StepsOmitted int            `json:"steps_omitted,omitempty"`
	// The caller's permission on the job's task when the ACL is on
	// ("view" or "run").
	Permission string `json:"permission,omitempty"`
}

// JobDetail is GET /api/jobs/{id}: the head and the steps.
type JobDetail struct {
	JobHead
	Steps []Step `json:"steps"`
}

// Step is a step record of a job.
type Step struct {
	StepName     string         `json:"step_name"`
	ActionName   string         `json:"action_name"`
	ActionType   string         `json:"action_type"`
	Runner       string         `json:"runner"`
	Input        map[string]any `json:"input"`
	Output       any            `json:"output"`
	Status       string         `json:"status"`
	WorkerID     *string        `json:"worker_id"`
	StartedAt    *time.Time     `json:"started_at"`
	CompletedAt  *time.Time     `json:"completed_at"`
	ErrorMessage *string        `json:"error_message"`
	// Beyond the interface: what an approver is asked, the job a task
	// step runs, and the job a re-run took this completed step over from.
	Message    string `json:"message,omitempty"`
	ChildJobID string `json:"child_job_id,omitempty"`
	ReusedFrom string `json:"reused_from,omitempty"`
	// Step retries: the attempt (1-based) and, while a failed attempt
	// waits to be retried, when the next one starts.
	Attempt int        `json:"attempt"`
	RetryAt *time.Time `json:"retry_at"`
	// The steps this one waits for (flow steps only), and when it became
	// ready to run: the UI draws the graph and the queue wait from them.
	DependsOn []string   `json:"depends_on,omitempty"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
}

// List is a page of items with the total matching the query.
type List[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
}

// JobList is a page of jobs: the interface's items and total, and the
// cursor of the next page (null on the last).
type JobList struct {
	Items      []Job   `json:"items"`
	Total      int     `json:"total"`
	NextCursor *string `json:"next_cursor"`
}

// StepList is a page of a job's steps in the job's order (flow steps each
// followed by its for_each instances), the total matching the filter, and
// the next page's cursor (null on the last).
type StepList struct {
	Items      []Step  `json:"items"`
	Total      int     `json:"total"`
	NextCursor *string `json:"next_cursor"`
}

// ExecuteRequest is the body of POST
// /api/workspaces/{ws}/tasks/{name}/execute.
type ExecuteRequest struct {
	Input map[string]any `json:"input"`
}

// RerunRequest is the optional body of POST /api/jobs/{id}/rerun.
type RerunRequest struct {
	Input      map[string]any `json:"input,omitzero"` // absent or null: the old job's input
	FromFailed bool           `json:"from_failed"`
}

// ApproveRequest is the body of POST /api/jobs/{id}/steps/{step}/approve.
type ApproveRequest struct {
	Approved        *bool          `json:"approved"`
	Input           map[string]any `json:"input"`
	RejectionReason string         `json:"rejection_reason"`
}

// JobCreated is the answer of execute and rerun: the new job's id.
type JobCreated struct {
	JobID string `json:"job_id"`
}

// StatusAnswer is the answer of cancel ("cancelled"), approve
// ("approved", "rejected"), logout and a password change ("ok"), an API
// key's deletion ("revoked") and a user's ("deleted").
type StatusAnswer struct {
	Status string `json:"status"`
}

// Logs is GET /api/jobs/{id}/logs (and a step's): the log's lines as one
// text, how many lines it holds, and the position the live stream resumes
// after.
type Logs struct {
	Logs  string `json:"logs"`
	Lines int    `json:"lines"`
	Next  int    `json:"next"`
}

// Terminal reports whether a job status is final.
func Terminal(status string) bool {
	switch status {
	case "completed", "failed", "cancelled", "skipped":
		return true
	}
	return false
}
