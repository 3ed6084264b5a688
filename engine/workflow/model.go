// Package workflow is the model of a workspace (actions, tasks, triggers,
// inputs, retries) that any package may import; it decodes no YAML and
// watches no files: engine/workspace loads and validates it.
// It must not import go-yaml, fsnotify, engine or engine/workspace.
package workflow

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// Action types.
const (
	TypeScript   = "script"
	TypeDocker   = "docker"
	TypePod      = "pod"
	TypeTask     = "task"
	TypeAgent    = "agent"
	TypeApproval = "approval"
)

// Trigger types.
const (
	TriggerScheduler   = "scheduler"
	TriggerWebhook     = "webhook"
	TriggerEventSource = "event_source"
)

// Workspace is one loaded, validated revision of a workspace directory.
// It is immutable once loaded: the engine shares it between goroutines.
type Workspace struct {
	Name     string `json:"name"`
	Dir      string `json:"-"`        // absolute path of the workspace root
	Revision string `json:"revision"` // content hash of every file the workspace ships

	Secrets         map[string]string          `json:"-"` // rendered at load time
	ConnectionTypes map[string]*ConnectionType `json:"connection_types,omitempty"`
	Connections     map[string]*Connection     `json:"-"` // rendered at load time; may hold secrets
	Actions         map[string]*Action         `json:"actions,omitempty"`
	Tasks           map[string]*Task           `json:"tasks,omitempty"`
	Triggers        map[string]*Trigger        `json:"triggers,omitempty"`
	// TriggerOrder is the trigger names in declaration order: files by
	// path, then as written in each. Webhook names are matched in it.
	TriggerOrder []string `json:"-"`
	OnSuccess    []*Hook  `json:"on_success,omitempty"`
	OnError      []*Hook  `json:"on_error,omitempty"`

	// Warnings are what `validate` points out without refusing the
	// workspace: a raw {{ }} value from an input, an output or an event.
	Warnings Errors `json:"-"`

	// Templates holds every template string of the workspace, parsed once
	// per revision; render through it instead of parsing again.
	Templates *template.Set `json:"-"`
}

// Duration is a timeout: "30s", "1h30m" or a plain integer of seconds.
type Duration time.Duration

// InputField defines one input of an action or task.
type InputField struct {
	Type        string   `json:"type"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Required    bool     `json:"required,omitempty"`
	Secret      bool     `json:"secret,omitempty"`
	Default     any      `json:"default,omitempty"`
	Options     []string `json:"options,omitempty"`
	AllowCustom bool     `json:"allow_custom,omitempty"`
	Order       *int     `json:"order,omitempty"`
}

// Inputs is an ordered map of input field definitions: Order lists the keys
// as the UI should show them (by `order`, then the rest in file order).
type Inputs struct {
	Fields map[string]*InputField
	Order  []string
}

// OutputField is one field of an output schema.
type OutputField struct {
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Default     any    `json:"default,omitempty"`
	Options     []any  `json:"options,omitempty"`
}

// Resources are the cpu and memory requests of a container or pod.
type Resources struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// Action is a reusable unit of execution. The same type carries an action's
// fields once rendered for a worker (the claim's action_spec).
type Action struct {
	Type        string                  `json:"type"`
	Name        string                  `json:"name,omitempty"`
	Description string                  `json:"description,omitempty"`
	Input       *Inputs                 `json:"input,omitempty"`
	Output      map[string]*OutputField `json:"output,omitempty"`
	Env         map[string]string       `json:"env,omitempty"`
	Tags        []string                `json:"tags,omitempty"`
	Workdir     string                  `json:"workdir,omitempty"`
	Resources   *Resources              `json:"resources,omitempty"`

	// script
	Script       string         `json:"script,omitempty"`
	Source       string         `json:"source,omitempty"`
	Runner       string         `json:"runner,omitempty"`   // local (default), docker, pod
	Language     string         `json:"language,omitempty"` // normalised: shell, python, javascript, typescript, go
	Dependencies []string       `json:"dependencies,omitempty"`
	Interpreter  string         `json:"interpreter,omitempty"`
	Manifest     map[string]any `json:"manifest,omitempty"` // script with runner pod, and pod

	// docker and pod
	Image      string   `json:"image,omitempty"`
	Cmd        string   `json:"cmd,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Command    []string `json:"command,omitempty"`

	// task
	Task string `json:"task,omitempty"`

	// agent
	Provider     string   `json:"provider,omitempty"`
	Prompt       string   `json:"prompt,omitempty"`
	SystemPrompt string   `json:"system_prompt,omitempty"`
	Model        string   `json:"model,omitempty"`
	MaxTokens    *int     `json:"max_tokens,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`

	// approval
	Message string `json:"message,omitempty"`

	RetrySpec // the default retries of the steps that run this action
}

// Task is a DAG of flow steps.
type Task struct {
	Name        string               `json:"name,omitempty"`
	Description string               `json:"description,omitempty"`
	Mode        string               `json:"mode"` // distributed
	Folder      string               `json:"folder,omitempty"`
	Input       *Inputs              `json:"input,omitempty"`
	Flow        map[string]*FlowStep `json:"flow"`
	FlowOrder   []string             `json:"-"` // step names in file order
	Timeout     Duration             `json:"timeout,omitempty"`
	OnSuccess   []*Hook              `json:"on_success,omitempty"`
	OnError     []*Hook              `json:"on_error,omitempty"`
	// Concurrency limits the task's own running jobs (per rendered key);
	// Queue joins a limit the server config names across tasks. Both are
	// the task's, unlike a scheduler trigger's `concurrency` policy.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Queue       string       `json:"queue,omitempty"`
}

// What a job of a task with a concurrency limit does when the limit is
// reached (Concurrency.OnLimit).
const (
	OnLimitQueue          = "queue" // the default: wait for a slot
	OnLimitSkip           = "skip"
	OnLimitCancelPrevious = "cancel_previous"
)

// Priority bounds of a queued job: higher starts first.
const (
	MinPriority = -100
	MaxPriority = 100
)

// Concurrency is a task's `concurrency` block: at most Limit jobs of the
// task (per rendered Key) run at once.
type Concurrency struct {
	Limit int `json:"limit"`
	// Key and Priority are templates over the job's input (or plain
	// text), rendered once when a job is created.
	Key      string `json:"key,omitempty"`
	OnLimit  string `json:"on_limit,omitempty"`
	Priority string `json:"priority,omitempty"`
}

// TaskPath is the path access rules match a task by: `folder/task`, or
// `task` when it has no folder.
func TaskPath(folder, task string) string {
	if folder = strings.Trim(folder, "/"); folder != "" {
		return folder + "/" + task
	}
	return task
}

// FlowStep is one node of a task's DAG. Exactly one of Action and Inline is set.
type FlowStep struct {
	Action            string         `json:"action,omitempty"`
	Inline            *Action        `json:"-"` // action fields placed directly on the step; see MarshalJSON
	Name              string         `json:"name,omitempty"`
	Description       string         `json:"description,omitempty"`
	DependsOn         []string       `json:"depends_on,omitempty"`
	Input             map[string]any `json:"input,omitempty"` // values may hold templates, nested in maps and lists
	ContinueOnFailure bool           `json:"continue_on_failure,omitempty"`
	Timeout           Duration       `json:"timeout,omitempty"`
	When              string         `json:"when,omitempty"`
	ForEach           any            `json:"for_each,omitempty"` // a template string or a literal list
	Sequential        bool           `json:"sequential,omitempty"`
	RetrySpec                        // over the action's
}

// Hook names an action to run when a job ends.
type Hook struct {
	Action string         `json:"action"`
	Input  map[string]any `json:"input,omitempty"`
}

// Trigger starts jobs: on a schedule, on a webhook call or from an event source.
type Trigger struct {
	Name    string         `json:"name"` // the map key; for webhooks the URL name
	Type    string         `json:"type"`
	Task    string         `json:"task"`
	Input   map[string]any `json:"input,omitempty"`
	Enabled bool           `json:"enabled"` // defaults to true

	// scheduler
	Cron        string `json:"cron,omitempty"`
	Timezone    string `json:"timezone,omitempty"`    // default UTC
	Concurrency string `json:"concurrency,omitempty"` // allow (default), skip, cancel_previous

	// webhook
	WebhookName string `json:"webhook_name,omitempty"` // the `name` field: /hooks/{name}
	Secret      string `json:"-"`
	Mode        string `json:"mode,omitempty"`         // async (default), sync
	TimeoutSecs int    `json:"timeout_secs,omitempty"` // default 30

	// event_source
	TargetTask    string            `json:"target_task,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
	RestartPolicy string            `json:"restart_policy,omitempty"` // always (default), on_failure, never
	BackoffSecs   int               `json:"backoff_secs,omitempty"`   // default 5
	MaxInFlight   int               `json:"max_in_flight,omitempty"`  // 0 = unlimited
}

// ConnectionType maps property names to their definitions.
type ConnectionType struct {
	Properties map[string]*InputField `json:"properties"`
}

// Connection is a named set of property values, validated against its type.
type Connection struct {
	Type   string         `json:"type,omitempty"`
	Values map[string]any `json:"values"`
}

// StepAction returns the action a flow step runs: its inline action or the
// named one.
func (ws *Workspace) StepAction(s *FlowStep) (*Action, bool) {
	if s.Inline != nil {
		return s.Inline, true
	}
	a, ok := ws.Actions[s.Action]
	return a, ok
}

// MarshalJSON writes an inline step as the workflow file does: its action's
// fields directly on the step, beside the step's own.
func (s *FlowStep) MarshalJSON() ([]byte, error) {
	type plain FlowStep // without this method; Inline is not marshalled
	own, err := json.Marshal((*plain)(s))
	if err != nil || s.Inline == nil {
		return own, err
	}
	inline, err := json.Marshal(s.Inline)
	if err != nil {
		return nil, err
	}
	merged := map[string]json.RawMessage{}
	if err := json.Unmarshal(inline, &merged); err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(own, &fields); err != nil {
		return nil, err
	}
	for k, v := range fields {
		merged[k] = v // the step's own name, description and input win
	}
	return json.Marshal(merged)
}
