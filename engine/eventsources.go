package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/appliance-sh/appliance/engine/workflow"
)

// EventOffsetEnv names the variable a consumer step finds the number of
// events its trigger has had accepted, over every consumer run, when the
// step was claimed: a consumer reading a file resumes after that many.
const EventOffsetEnv = "APPLIANCE_EVENT_OFFSET"

// Emission is one `OUTPUT: ` line of a consumer step: its number in the
// step run (0 = unnumbered: no exactly-once) and the text after the prefix.
type Emission struct {
	Seq  int64
	JSON string
}

// EventMark is an event source's progress, committed in the same
// transaction as the jobs its events create: the last line accepted from
// one step run, and how many events the trigger has had accepted in all.
type EventMark struct {
	Source   string // {workspace}/{trigger}
	JobID    string
	Step     string
	Run      string
	Seq      int64
	Consumed int64
}

// EventStore is a Store that keeps event marks (store.DB does). Without
// it, marks live in memory only.
type EventStore interface {
	// EventMark returns a step's last mark (zero values when none).
	EventMark(ctx context.Context, jobID, step string) (run string, seq int64, err error)
	// EventsConsumed returns how many events the source has had accepted.
	EventsConsumed(ctx context.Context, source string) (int64, error)
}

// eventMemory is the loop's copy of the marks it committed; a reload
// (new state) starts it afresh from the store.
type eventMemory struct {
	marks    map[StepRef]stepMark
	consumed map[string]int64
}

type stepMark struct {
	run string
	seq int64
}

// ConsumerTrigger returns the event_source trigger a job is the consumer
// of, with its source id: the job comes from a trigger (source_type
// trigger) whose definition, in the job's revision, is an event source
// running the job's task. Nil for any other job.
func (e *Engine) ConsumerTrigger(j *Job) (*workflow.Trigger, string) {
	if j == nil || j.SourceType != SourceTrigger || j.SourceID == nil {
		return nil, ""
	}
	ws, ok := e.cfg.Workspaces.Revision(j.Workspace, j.Revision)
	if !ok {
		if ws, ok = e.cfg.Workspaces.Current(j.Workspace); !ok {
			return nil, ""
		}
	}
	return consumerTriggerIn(ws, j)
}

// isConsumer says whether a job is an event source's consumer (nil: no).
func isConsumer(js *jobState) bool {
	if js == nil {
		return false
	}
	tr, _ := consumerTriggerIn(js.ws, js.job)
	return tr != nil
}

func consumerTriggerIn(ws *workflow.Workspace, j *Job) (*workflow.Trigger, string) {
	if ws == nil || j.SourceType != SourceTrigger || j.SourceID == nil {
		return nil, ""
	}
	name, ok := strings.CutPrefix(*j.SourceID, j.Workspace+"/")
	if !ok {
		return nil, ""
	}
	tr, ok := ws.Triggers[name]
	if !ok || tr.Type != workflow.TriggerEventSource || tr.Task != j.TaskName {
		return nil, ""
	}
	return tr, *j.SourceID
}

// withTriggerEnv adds, to a consumer step's action (a copy), its trigger's
// env on top of the action's own (rendered with the rest of the spec, so
// `secret.*` works) and EventOffsetEnv. It reports whether the job is a
// consumer. Runs in the loop.
func (e *Engine) withTriggerEnv(js *jobState, a *workflow.Action) bool {
	tr, source := consumerTriggerIn(js.ws, js.job)
	if tr == nil {
		return false
	}
	env := make(map[string]string, len(a.Env)+len(tr.Env)+1)
	for k, v := range a.Env {
		env[k] = v
	}
	for k, v := range tr.Env {
		env[k] = v
	}
	consumed, _ := e.consumedIn(source, -1)
	env[EventOffsetEnv] = strconv.FormatInt(consumed, 10)
	a.Env = env
	return true
}

// consumedIn is the loop's count of a source's accepted events: memory,
// else hint (read from the store off the loop; negative = read it now).
func (e *Engine) consumedIn(source string, hint int64) (int64, bool) {
	m := &e.st.events
	if n, ok := m.consumed[source]; ok {
		return n, true
	}
	if hint < 0 {
		hint = 0
		if es, ok := e.cfg.Store.(EventStore); ok {
			if n, err := es.EventsConsumed(context.Background(), source); err == nil {
				hint = n
			}
		}
	}
	return hint, false
}

// built is one emission's job, built off the loop, or why it cannot be.
type built struct {
	js  *jobState
	err error
}

// Emit offers a consumer step run's `OUTPUT: ` lines, in order. Each
// accepted line creates a job of the trigger's target_task (the trigger's
// input overlaid by the line's object) in the commit that records the
// line's number, so a line offered again (a repeated push, a restart) is
// accepted once. A line that is not a JSON object, or whose input does
// not resolve, is accepted without a job: a `_server` warning in the
// consumer's log says why.
//
// accepted counts the leading lines that are now accepted (the ones
// accepted before included). Fewer than all means the trigger has
// max_in_flight target jobs pending or running: wait is closed when one of
// them ends (or ctx does), and the rest may be offered again. A job that is not a
// consumer accepts every line and creates nothing.
func (e *Engine) Emit(ctx context.Context, jobID, step, run string, ems []Emission) (accepted int, wait <-chan struct{}, err error) {
	if len(ems) == 0 {
		return 0, nil, nil
	}
	job, err := e.storedJob(ctx, jobID)
	if err != nil {
		return 0, nil, err
	}
	tr, source := e.ConsumerTrigger(job)
	if tr == nil {
		return len(ems), nil, nil
	}
	// What the store has (a hint for the loop, which may know better).
	var hintRun string
	var hintSeq, hintConsumed int64
	if es, ok := e.cfg.Store.(EventStore); ok {
		if hintRun, hintSeq, err = es.EventMark(ctx, jobID, step); err != nil {
			return 0, nil, err
		}
		if hintConsumed, err = es.EventsConsumed(ctx, source); err != nil {
			return 0, nil, err
		}
	}
	if h, ok := e.eventHints.Load(StepRef{JobID: jobID, Step: step}); ok {
		if m := h.(stepMark); m.run == run && (hintRun != run || m.seq > hintSeq) {
			hintRun, hintSeq = m.run, m.seq
		}
	}
	// Build the jobs outside the loop: at most max_in_flight of them, as
	// no more can be accepted in one go.
	builds := make([]*built, len(ems))
	n := 0
	for i, em := range ems {
		if tr.MaxInFlight > 0 && n >= tr.MaxInFlight {
			break
		}
		if em.Seq > 0 && hintRun == run && em.Seq <= hintSeq {
			continue
		}
		builds[i] = e.buildEvent(job, tr, source, em)
		n++
	}
	type answer struct {
		n       int
		blocked []string
	}
	v, err := e.do(ctx, func(b *batch) (any, error) {
		cjs, ok := e.st.jobs[jobID]
		if !ok {
			return nil, fmt.Errorf("%w: job %s is not running", ErrConflict, jobID)
		}
		m := &e.st.events
		if m.marks == nil {
			m.marks, m.consumed = map[StepRef]stepMark{}, map[string]int64{}
		}
		key := StepRef{JobID: jobID, Step: step}
		mark, ok := m.marks[key]
		if !ok {
			mark = stepMark{run: hintRun, seq: hintSeq}
		}
		if mark.run != run {
			mark = stepMark{run: run}
		}
		consumed, _ := e.consumedIn(source, hintConsumed)
		var live []*jobState
		if tr.MaxInFlight > 0 {
			for _, js := range e.liveFromSource(SourceTrigger, source) {
				if js.job.TaskName == tr.TargetTask && js != cjs {
					live = append(live, js)
				}
			}
		}
		changed := false
		i := 0
		for ; i < len(ems); i++ {
			em := ems[i]
			if em.Seq > 0 && em.Seq <= mark.seq {
				continue
			}
			bd := builds[i]
			if bd == nil {
				break // not built: over max_in_flight, or accepted before
			}
			if bd.err == nil {
				if tr.MaxInFlight > 0 && len(live) >= tr.MaxInFlight {
					break
				}
				// Created now, not when built: the job was waiting for
				// room among the trigger's in-flight jobs.
				j := bd.js.job
				if shift := b.now.Sub(j.CreatedAt); shift > 0 {
					j.CreatedAt = b.now
					if j.Deadline != nil {
						d := j.Deadline.Add(shift)
						j.Deadline = &d
					}
				}
				e.insertJob(b, bd.js)
				live = append(live, bd.js)
			} else {
				b.serverLog(jobID, fmt.Sprintf("warning: event source %s: step %s line %d not accepted: %v", source, step, em.Seq, bd.err))
			}
			if em.Seq > 0 {
				mark.seq = em.Seq
			}
			consumed++
			changed = true
		}
		if changed {
			if _, known := m.marks[key]; !known {
				// A new consumer step: forget those of ended jobs (their
				// marks stay in the store, for a push that comes late).
				for k := range m.marks {
					if _, live := e.st.jobs[k.JobID]; !live {
						delete(m.marks, k)
						e.eventHints.Delete(k)
					}
				}
			}
			m.marks[key] = mark
			e.eventHints.Store(key, mark)
			m.consumed[source] = consumed
			b.marks = append(b.marks, EventMark{Source: source, JobID: jobID, Step: step, Run: run, Seq: mark.seq, Consumed: consumed})
		}
		ans := answer{n: i}
		if i < len(ems) {
			for _, js := range live {
				ans.blocked = append(ans.blocked, js.job.ID)
			}
		}
		return ans, nil
	})
	if err != nil {
		return 0, nil, err
	}
	ans := v.(answer)
	if ans.n == len(ems) {
		return ans.n, nil, nil
	}
	// Room comes back when any target job in flight ends.
	room := make(chan struct{})
	var once sync.Once
	fire := func() { once.Do(func() { close(room) }) }
	waiting := 0
	for _, id := range ans.blocked {
		done, err := e.JobDone(ctx, id)
		if err != nil {
			continue
		}
		waiting++
		go func() {
			select {
			case <-done:
				fire()
			case <-room:
			case <-ctx.Done():
			}
		}()
	}
	if waiting == 0 {
		fire() // nothing to wait for: offer again at once
	}
	return ans.n, room, nil
}

// buildEvent builds the target job of one emission: the trigger's input
// overlaid by the emitted object, resolved as any input is.
func (e *Engine) buildEvent(consumer *Job, tr *workflow.Trigger, source string, em Emission) *built {
	var obj map[string]any
	if err := json.Unmarshal([]byte(em.JSON), &obj); err != nil || obj == nil {
		if err == nil {
			err = fmt.Errorf("not a JSON object")
		}
		return &built{err: fmt.Errorf("malformed JSON after OUTPUT: %v", err)}
	}
	input := make(map[string]any, len(tr.Input)+len(obj))
	for k, v := range tr.Input {
		input[k] = v
	}
	for k, v := range obj {
		input[k] = v
	}
	src := source
	js, err := e.buildJobBounded(CreateJob{Workspace: consumer.Workspace, Task: tr.TargetTask, Input: input,
		SourceType: SourceTrigger, SourceID: &src})
	if err != nil {
		return &built{err: fmt.Errorf("job of %s: %w", tr.TargetTask, err)}
	}
	return &built{js: js}
}

// LiveFromSource lists the non-terminal jobs a trigger created (the event
// sources' supervisor adopts a consumer still running after a restart).
func (e *Engine) LiveFromSource(ctx context.Context, sourceType, sourceID string) ([]*Job, error) {
	v, err := e.do(ctx, func(*batch) (any, error) {
		var out []*Job
		for _, js := range e.liveFromSource(sourceType, sourceID) {
			c := *js.job
			out = append(out, &c)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]*Job), nil
}

// States of an event source's consumer (ConsumerStatus.State), as GET
// /api/workspaces/{ws}/triggers shows them.
const (
	ConsumerRunning = "running"
	ConsumerBackoff = "backoff"
	ConsumerStopped = "stopped"
	// ConsumerStarting: an enabled event source the supervisor, running,
	// has not taken up yet (it is just starting, or the trigger just
	// appeared in a hot reload); the supervisor never reports it, only the
	// API shows it.
	ConsumerStarting = "starting"
)

// ConsumerStatus is an event source's consumer, as the triggers list shows
// it: the supervisor (app/eventsources) keeps it, the API shows it.
type ConsumerStatus struct {
	ConsumerJobID string // "" before the first start
	State         string
	Restarts      int
}
