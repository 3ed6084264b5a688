package engine

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// QueueView is one limit in use or configured: a named queue, or a task's
// limit for one key, with the jobs holding its slots and those in line.
type QueueView struct {
	Name      string // a named queue; "" for a task's limit
	Workspace string // a task's limit
	Task      string
	Key       string
	Limit     int // 0 = none (a queue no longer configured)
	Running   []QueuedJob
	Queued    []QueuedJob // in line
}

// QueuedJob is a job holding a slot, or waiting for one, as a QueueView
// lists it.
type QueuedJob struct {
	JobID      string
	Workspace  string
	TaskName   string
	AccessPath string
	Priority   int
	Position   int // 1-based place in this line; 0 when running
	CreatedAt  time.Time
	Since      *time.Time // waiting since
}

// Queues lists every named queue of the config and every task limit in
// use (a key with no job costs nothing and is not listed), named queues
// first, each with its running and queued jobs.
func (e *Engine) Queues(ctx context.Context) ([]QueueView, error) {
	v, err := e.do(ctx, func(*batch) (any, error) {
		seen := map[string]bool{}
		var out []QueueView
		for _, l := range e.st.slots.m {
			seen[l.queue] = l.queue != ""
			out = append(out, e.viewOf(l))
		}
		for name, lim := range e.cfg.Queues {
			if !seen[name] {
				out = append(out, QueueView{Name: name, Limit: lim})
			}
		}
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if (a.Name == "") != (b.Name == "") {
				return a.Name != ""
			}
			if a.Name != b.Name {
				return a.Name < b.Name
			}
			if a.Workspace != b.Workspace {
				return a.Workspace < b.Workspace
			}
			if a.Task != b.Task {
				return a.Task < b.Task
			}
			return a.Key < b.Key
		})
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]QueueView), nil
}

func (e *Engine) viewOf(l *slotLimit) QueueView {
	v := QueueView{Name: l.queue, Workspace: l.ws, Task: l.task, Key: l.key, Limit: e.capacity(l)}
	held := make([]*jobState, 0, len(l.holders))
	for js := range l.holders {
		held = append(held, js)
	}
	sort.Slice(held, func(i, j int) bool { return l.holders[held[i]] < l.holders[held[j]] })
	v.Running = make([]QueuedJob, 0, len(held))
	for _, js := range held {
		v.Running = append(v.Running, queuedJobOf(js, 0))
	}
	v.Queued = make([]QueuedJob, 0, len(l.waiting))
	for i, js := range l.waiting {
		v.Queued = append(v.Queued, queuedJobOf(js, i+1))
	}
	return v
}

func queuedJobOf(js *jobState, pos int) QueuedJob {
	j := js.job
	return QueuedJob{JobID: j.ID, Workspace: j.Workspace, TaskName: j.TaskName, AccessPath: j.AccessPath,
		Priority: j.Queue.Priority, Position: pos, CreatedAt: j.CreatedAt, Since: copyTime(j.Queue.Since)}
}

// queuedCounts counts the waiting jobs by queue label (see queueLabel).
func (e *Engine) queuedCounts() map[string]int {
	out := map[string]int{}
	for name := range e.cfg.Queues {
		out[name] = 0
	}
	for _, js := range e.st.jobs {
		if js.job.Queued() {
			out[queueLabel(js)]++
		}
	}
	return out
}

// SetPriority changes a queued job's priority (ErrConflict unless it
// waits for a slot; ErrInvalid out of range): it moves in every line it
// waits in, and starts if it is now first where there is room.
func (e *Engine) SetPriority(ctx context.Context, jobID string, priority int) (*Job, error) {
	if err := checkPriority(priority); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	v, err := e.do(ctx, func(b *batch) (any, error) {
		js, err := e.liveJob(ctx, jobID)
		if err != nil {
			return nil, err
		}
		if !js.job.Queued() {
			return nil, fmt.Errorf("job %s is not queued: %w", jobID, ErrConflict)
		}
		for _, id := range js.job.Queue.Slots {
			if l, ok := e.st.slots.m[id]; ok {
				l.unline(js)
			}
		}
		q := *js.job.Queue
		q.Priority = priority
		js.job.Queue = &q
		for _, id := range q.Slots {
			e.limit(id, js).line(js)
		}
		b.dirtyJob(js.job)
		b.serverLog(jobID, fmt.Sprintf("queue priority set to %d", priority))
		e.pump(b, q.Slots...)
		c := *js.job
		if c.Queued() {
			pq := *c.Queue
			pq.Position = e.position(js)
			c.Queue = &pq
		}
		return &c, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Job), nil
}

// placeQueued fills in the position of the waiting jobs among jobs, read
// from the store, in one turn of the loop (none when none waits).
func (e *Engine) placeQueued(ctx context.Context, jobs []*Job) error {
	var queued []*Job
	for _, j := range jobs {
		if j.Queued() {
			queued = append(queued, j)
		}
	}
	if len(queued) == 0 {
		return nil
	}
	v, err := e.do(ctx, func(*batch) (any, error) {
		pos := make([]int, len(queued))
		for i, j := range queued {
			if js, ok := e.st.jobs[j.ID]; ok {
				pos[i] = e.position(js)
			}
		}
		return pos, nil
	})
	if err != nil {
		return err
	}
	for i, p := range v.([]int) {
		q := *queued[i].Queue
		q.Position = p
		queued[i].Queue = &q
	}
	return nil
}

// queuedJobs is a page of the jobs waiting for a slot that f selects, in
// line order (by priority, then creation), from memory: every one is live.
func (e *Engine) queuedJobs(ctx context.Context, f JobFilter) ([]*Job, int, error) {
	v, err := e.do(ctx, func(*batch) (any, error) {
		var match []*jobState
		for _, js := range e.st.jobs {
			j := js.job
			if !j.Queued() || f.Workspace != "" && j.Workspace != f.Workspace || f.TaskName != "" && j.TaskName != f.TaskName ||
				f.SourceType != "" && j.SourceType != f.SourceType || len(f.Statuses) > 0 && !containsStr(f.Statuses, j.Status) ||
				f.Visible != nil && !f.Visible(j.Workspace, j.AccessPath) {
				continue
			}
			match = append(match, js)
		}
		sort.Slice(match, func(a, b int) bool { return before(match[a].job, match[b].job) })
		total := len(match)
		match = match[min(f.Offset, total):min(f.Offset+f.Limit, total)]
		out := make([]*Job, len(match))
		for i, js := range match {
			c := *js.job
			c.StartedAt, c.CompletedAt, c.Deadline = copyTime(c.StartedAt), copyTime(c.CompletedAt), copyTime(c.Deadline)
			c.SourceID = copyString(c.SourceID)
			q := *c.Queue
			q.Position = e.position(js)
			c.Queue = &q
			out[i] = &c
		}
		return [2]any{out, total}, nil
	})
	if err != nil {
		return nil, 0, err
	}
	r := v.([2]any)
	return r[0].([]*Job), r[1].(int), nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
