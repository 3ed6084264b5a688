package wire

import (
	"encoding/json"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// Workspace is a workspace as GET /api/workspaces lists it.
type Workspace struct {
	Name          string   `json:"name"`
	TasksCount    int      `json:"tasks_count"`
	ActionsCount  int      `json:"actions_count"`
	TriggersCount int      `json:"triggers_count"`
	Revision      string   `json:"revision"`
	Errors        []string `json:"errors,omitempty"`
}

// Task is a task as GET /api/workspaces/{ws}/tasks lists it.
type Task struct {
	Name        string `json:"name"`
	Workspace   string `json:"workspace"`
	Mode        string `json:"mode"`
	HasTriggers bool   `json:"has_triggers"`
	Folder      string `json:"folder,omitempty"`
	// Beyond the interface: the task's display name (its `name:`) and
	// description, for lists that show them.
	DisplayName string `json:"display_name,omitempty"`
	Description string `json:"description,omitempty"`
	// Beyond the interface: the caller's permission when the ACL is on.
	Permission string `json:"permission,omitempty"`
}

// TaskDetail is GET /api/workspaces/{ws}/tasks/{name}.
type TaskDetail struct {
	Name        string           `json:"name"`
	DisplayName string           `json:"display_name,omitempty"` // the task's `name:` (ours)
	Description string           `json:"description,omitempty"`
	Folder      string           `json:"folder,omitempty"`
	Mode        string           `json:"mode"`
	Input       *workflow.Inputs `json:"input"`
	Flow        json.RawMessage  `json:"flow"` // steps in file order
	Triggers    []Trigger        `json:"triggers"`
	Permission  string           `json:"permission,omitempty"` // as in Task
}

// Trigger is a trigger as the API shows it: never its secret.
type Trigger struct {
	Name        string         `json:"name"`
	Type        string         `json:"type"`
	Task        string         `json:"task"`
	Enabled     bool           `json:"enabled"`
	Input       map[string]any `json:"input"`
	Cron        string         `json:"cron,omitempty"`
	Timezone    string         `json:"timezone,omitempty"`
	Concurrency string         `json:"concurrency,omitempty"`
	NextRuns    []time.Time    `json:"next_runs,omitzero"` // [] for a disabled scheduler trigger, absent for other types

	WebhookName string `json:"webhook_name,omitempty"`
	Mode        string `json:"mode,omitempty"`
	TimeoutSecs int    `json:"timeout_secs,omitempty"`
	HasSecret   bool   `json:"has_secret,omitempty"`

	TargetTask    string `json:"target_task,omitempty"`
	RestartPolicy string `json:"restart_policy,omitempty"`
	MaxInFlight   int    `json:"max_in_flight,omitempty"`
	BackoffSecs   int    `json:"backoff_secs,omitempty"`
	// Event sources: the consumer job (null before the first), its state
	// and how many times it restarted.
	ConsumerJobID json.RawMessage `json:"consumer_job_id,omitempty"` // null before the first
	State         string          `json:"state,omitempty"`
	Restarts      *int            `json:"restarts,omitempty"`
}
