package api

import (
	"maps"

	"github.com/appliance-sh/appliance/api/httpx"
	"github.com/appliance-sh/appliance/api/wire"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// The answers' types are in api/wire; the functions below build them from
// the engine's records, so internal fields (ready_at, required_tags, seq)
// never leak and every timestamp is written in UTC.

// object keeps absent maps as {} on the wire where the interface says object.
func object(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// jobOf is the job as the lists show it.
func jobOf(j *engine.Job) wire.Job {
	return wire.Job{
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
		Queue:       queueOf(j),
	}
}

// queueOf is a waiting job's place in line, nil for any other job.
func queueOf(j *engine.Job) *wire.JobQueue {
	if !j.Queued() {
		return nil
	}
	q := j.Queue
	return &wire.JobQueue{Name: q.Name, Key: q.Key, Position: q.Position, Priority: q.Priority, Since: httpx.UTCPtr(q.Since)}
}

func stepOf(s *engine.Step) wire.Step {
	return wire.Step{
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

// maskedStep replaces the job's secret values in what the step was given
// and in its messages. Outputs are shown as the steps wrote them: printing
// a secret in OUTPUT is the author's choice (its log line is still
// masked). An approval's output is the server's, and its `input` is what
// the approver gave: masked like any input.
func maskedStep(s wire.Step, secrets []string) wire.Step {
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

// maskedWorkerStep replaces the job's secret values in the step's error
// message.
func maskedWorkerStep(v wire.WorkerStep, secrets []string) wire.WorkerStep {
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

func workerOf(w *engine.Worker) wire.Worker {
	tags := w.Tags
	if tags == nil {
		tags = []string{}
	}
	return wire.Worker{ID: w.ID, Name: w.Name, Tags: tags, Status: w.Status, LastSeen: w.LastSeen.UTC()}
}

func workerStepOf(s *engine.WorkerStep) wire.WorkerStep {
	return wire.WorkerStep{
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
