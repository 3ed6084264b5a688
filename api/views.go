package api

import (
	"maps"
	"time"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// The views below are the interface's wire shapes. They are separate from
// the engine's records so internal fields (ready_at, required_tags, seq)
// never leak and every timestamp is written in UTC.

type jobItem struct {
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
}

type stepView struct {
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

type workerItem struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Tags     []string  `json:"tags"`
	Status   string    `json:"status"`
	LastSeen time.Time `json:"last_seen"`
}

type workerDetail struct {
	workerItem
	Steps workerSteps `json:"steps"`
}

type workerSteps struct {
	Items []workerStepView `json:"items"`
	Total int              `json:"total"`
}

type workerStepView struct {
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

// object keeps absent maps as {} on the wire where the interface says object.
func object(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

func jobItemOf(j *engine.Job) jobItem {
	return jobItem{
		JobID:       j.ID,
		Workspace:   j.Workspace,
		TaskName:    j.TaskName,
		Mode:        j.Mode,
		Status:      j.Status,
		SourceType:  j.SourceType,
		SourceID:    j.SourceID,
		Revision:    j.Revision,
		CreatedAt:   j.CreatedAt.UTC(),
		StartedAt:   httpx.UTCPtr(j.StartedAt),
		CompletedAt: httpx.UTCPtr(j.CompletedAt),
		RerunOf:     j.RerunOf,
	}
}

func stepViewOf(s *engine.Step) stepView {
	return stepView{
		StepName:     s.Name,
		ActionName:   s.ActionName,
		ActionType:   s.ActionType,
		Runner:       s.Runner,
		Input:        object(s.Input),
		Output:       s.Output,
		Status:       s.Status,
		WorkerID:     s.WorkerID,
		StartedAt:    httpx.UTCPtr(s.StartedAt),
		CompletedAt:  httpx.UTCPtr(s.CompletedAt),
		ErrorMessage: s.ErrorMessage,
		Message:      s.Message,
		ChildJobID:   s.ChildJobID,
		ReusedFrom:   s.ReusedFrom,
		Attempt:      s.AttemptNumber(),
		RetryAt:      httpx.UTCPtr(s.RetryAt),
		DependsOn:    s.DependsOn,
		ReadyAt:      httpx.UTCPtr(s.ReadyAt),
	}
}

// masked replaces the job's secret values in what the step was given and
// in its messages. Outputs are shown as the steps wrote them: printing a
// secret in OUTPUT is the author's choice (its log line is still masked).
// An approval's output is the server's, and its `input` is what the
// approver gave: masked like any input.
func (s stepView) masked(secrets []string) stepView {
	if len(secrets) == 0 {
		return s
	}
	s.Input = engine.MaskMap(s.Input, secrets)
	if s.ActionType == workflow.TypeApproval {
		s.Output = maskedApproval(s.Output, secrets)
	}
	s.Message = engine.Mask(s.Message, secrets)
	if s.ErrorMessage != nil {
		m := engine.Mask(*s.ErrorMessage, secrets)
		s.ErrorMessage = &m
	}
	return s
}

// masked replaces the job's secret values in the step's error message.
func (v workerStepView) masked(secrets []string) workerStepView {
	if v.ErrorMessage != nil && len(secrets) > 0 {
		m := engine.Mask(*v.ErrorMessage, secrets)
		v.ErrorMessage = &m
	}
	return v
}

// maskedApproval is an approval step's output with the approver's input
// masked.
func maskedApproval(output any, secrets []string) any {
	out, ok := output.(map[string]any)
	if !ok {
		return output
	}
	out = maps.Clone(out)
	out["input"] = engine.MaskValue(out["input"], secrets)
	return out
}

func workerItemOf(w *engine.Worker) workerItem {
	tags := w.Tags
	if tags == nil {
		tags = []string{}
	}
	return workerItem{ID: w.ID, Name: w.Name, Tags: tags, Status: w.Status, LastSeen: w.LastSeen.UTC()}
}

func workerStepOf(s *engine.WorkerStep) workerStepView {
	return workerStepView{
		JobID:        s.JobID,
		Workspace:    s.Workspace,
		TaskName:     s.TaskName,
		JobStatus:    s.JobStatus,
		StepName:     s.StepName,
		ActionType:   s.ActionType,
		Status:       s.Status,
		StartedAt:    httpx.UTCPtr(s.StartedAt),
		CompletedAt:  httpx.UTCPtr(s.CompletedAt),
		ErrorMessage: s.ErrorMessage,
	}
}
