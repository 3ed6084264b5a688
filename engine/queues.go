package engine

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
	"github.com/appliance-sh/appliance/engine/workflow"
)

// Queues and concurrency limits (DESIGN.md "Queues and concurrency
// limits"). A job of a task with a `concurrency` limit or a `queue` needs a
// slot of each limit it is under (its ancestors' excepted: a child or hook
// job runs within a slot its parent holds). It takes them all at once when
// each has room, or waits, pending, in every one of them, holding none.
// Slots free when a job ends, and the loop then starts the waiters in
// order: priority, then creation. Every decision is made on the loop and
// stored with the job (Job.Queue), so load rebuilds the lines from the
// store.

// maxKeyLength bounds a rendered concurrency key.
const maxKeyLength = 200

// slotLimit is one limit in use: a named queue's, or a task's for one key.
// It exists only while a job holds or waits for one of its slots.
type slotLimit struct {
	id       string
	queue    string // a named queue's name, "" for a task's limit
	ws, task string // a task's limit
	key      string
	fallback int                  // the task's limit when the job was created
	holders  map[*jobState]uint64 // by start order (slotIndex.started)
	waiting  []*jobState          // in line: by priority, then creation (before)
}

// slotIndex is every limit in use, on the loop.
type slotIndex struct {
	m map[string]*slotLimit
	// dirty lists the limits whose slots may have freed; pump drains it
	// (pumping: a start that frees or takes slots within the drain only
	// adds to it, so nothing recurses).
	dirty   []string
	pumping bool
	started uint64 // counts slots taken, to order holders
}

func newSlotIndex() *slotIndex { return &slotIndex{m: map[string]*slotLimit{}} }

// Limit ids join their parts with a unit separator (U+001F), which no
// workspace, task or queue name holds, and which a key, last, cannot
// confuse. Not a NUL: a PostgreSQL jsonb value cannot hold one.
func queueLimitID(name string) string { return "queue\x1f" + name }

func taskLimitID(ws, task, key string) string { return "task\x1f" + ws + "\x1f" + task + "\x1f" + key }

// before says whether a is ahead of b in line.
func before(a, b *Job) bool {
	if a.Queue.Priority != b.Queue.Priority {
		return a.Queue.Priority > b.Queue.Priority
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// jobQueueOf renders a new job's concurrency key and priority from its
// input (off the loop, under the render limits of ctx): a bad one is
// ErrInvalid naming the field.
func jobQueueOf(ctx context.Context, ws *workflow.Workspace, task *workflow.Task, input map[string]any) (*JobQueue, error) {
	c := task.Concurrency
	if c == nil && task.Queue == "" {
		return nil, nil
	}
	q := &JobQueue{Name: task.Queue}
	if c == nil {
		return q, nil
	}
	q.Keyed = true
	if c.Key != "" {
		key, err := renderText(ctx, ws, c.Key, input)
		if err != nil {
			return nil, fmt.Errorf("%w: concurrency.key: %v", ErrInvalid, err)
		}
		switch key = strings.TrimSpace(key); {
		case key == "":
			return nil, fmt.Errorf("%w: concurrency.key: %q rendered empty", ErrInvalid, c.Key)
		case len(key) > maxKeyLength:
			return nil, fmt.Errorf("%w: concurrency.key: rendered %d bytes, over the limit of %d", ErrInvalid, len(key), maxKeyLength)
		}
		q.Key = key
	}
	if c.Priority != "" {
		text, err := renderText(ctx, ws, c.Priority, input)
		if err != nil {
			return nil, fmt.Errorf("%w: concurrency.priority: %v", ErrInvalid, err)
		}
		p, err := ParsePriority(text)
		if err != nil {
			return nil, fmt.Errorf("%w: concurrency.priority: %v", ErrInvalid, err)
		}
		q.Priority = p
	}
	return q, nil
}

// ParsePriority reads a queued job's priority: an integer from
// workflow.MinPriority to workflow.MaxPriority.
func ParsePriority(s string) (int, error) {
	s = strings.TrimSpace(s)
	p, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer (from %d to %d)", s, workflow.MinPriority, workflow.MaxPriority)
	}
	if err := checkPriority(p); err != nil {
		return 0, err
	}
	return p, nil
}

func checkPriority(p int) error {
	if p < workflow.MinPriority || p > workflow.MaxPriority {
		return fmt.Errorf("priority %d is out of range (from %d to %d)", p, workflow.MinPriority, workflow.MaxPriority)
	}
	return nil
}

// renderText renders a key or priority. `{{ input.NAME }}` of a string or
// an integer reads the input as the render would, without the template
// engine; anything else renders.
func renderText(ctx context.Context, ws *workflow.Workspace, src string, input map[string]any) (string, error) {
	if !template.IsTemplate(src) {
		return src, nil
	}
	if name, ok := workflow.InputRef(src); ok {
		switch v := input[name].(type) {
		case string:
			return v, nil
		case int:
			return strconv.Itoa(v), nil
		case int64:
			return strconv.FormatInt(v, 10), nil
		}
	}
	return ws.Templates.RenderContext(ctx, src, map[string]any{"input": input})
}

// slotsOf lists the limits a new job needs a slot of: its task's (for its
// key) and its queue's, less those an ancestor holds, which it runs within
// (js.within; for a hook job, the firing job's). It sets js.within and the
// job's Within, stored so that a restart knows them: a job of a task with
// no limit gets a Queue for that alone when its parent runs within or
// holds a limit, so that its own children run within it too.
func (e *Engine) slotsOf(js *jobState) []string {
	within := js.within
	if p, ok := e.st.jobs[js.job.ParentJobID]; ok && js.job.ParentJobID != "" {
		within = append(slices.Clone(within), heldBy(p)...)
	}
	js.within = within
	if len(within) == 0 {
		if js.job.Queue == nil {
			return nil
		}
	} else if js.job.Queue == nil {
		js.job.Queue = &JobQueue{Within: within}
	} else {
		q := *js.job.Queue
		q.Within = within
		js.job.Queue = &q
	}
	return neededSlots(js.job)
}

// neededSlots is the job's task limit and queue, less Within.
func neededSlots(j *Job) []string {
	q := j.Queue
	ids := make([]string, 0, 2)
	if q.Keyed {
		ids = append(ids, taskLimitID(j.Workspace, j.TaskName, q.Key))
	}
	if q.Name != "" {
		ids = append(ids, queueLimitID(q.Name))
	}
	return slices.DeleteFunc(ids, func(id string) bool { return slices.Contains(q.Within, id) })
}

// limit returns the limit id names, made for js if it is not in use.
func (e *Engine) limit(id string, js *jobState) *slotLimit {
	if l, ok := e.st.slots.m[id]; ok {
		return l
	}
	l := &slotLimit{id: id, holders: map[*jobState]uint64{}}
	if strings.HasPrefix(id, "queue\x1f") {
		l.queue = js.job.Queue.Name
	} else {
		l.ws, l.task, l.key = js.job.Workspace, js.job.TaskName, js.job.Queue.Key
		if c := js.task.Concurrency; c != nil {
			l.fallback = c.Limit
		}
	}
	e.st.slots.m[id] = l
	return l
}

// capacity is how many jobs may hold a slot of l at once, 0 for no limit:
// the server config's for a queue, the task's in the workspace's current
// revision for a task (a reload applies to the next start), or the one
// the task had when its jobs were created if it is gone.
func (e *Engine) capacity(l *slotLimit) int {
	if l.queue != "" {
		return e.cfg.Queues[l.queue]
	}
	if ws, ok := e.cfg.Workspaces.Current(l.ws); ok {
		if t, ok := ws.Tasks[l.task]; ok {
			if t.Concurrency == nil {
				return 0
			}
			return t.Concurrency.Limit
		}
	}
	return l.fallback
}

func (e *Engine) hasRoom(l *slotLimit) bool {
	c := e.capacity(l)
	return c == 0 || len(l.holders) < c
}

// canStart says whether every limit of a waiting job has room.
func (e *Engine) canStart(js *jobState) bool {
	for _, id := range js.job.Queue.Slots {
		if l, ok := e.st.slots.m[id]; ok && !e.hasRoom(l) {
			return false
		}
	}
	return true
}

// overLimit says whether a new job would have to wait: a limit of it has
// no room, or someone waits ahead of it.
func (e *Engine) overLimit(js *jobState) bool {
	for _, id := range js.job.Queue.Slots {
		l, ok := e.st.slots.m[id]
		if !ok {
			continue
		}
		if !e.hasRoom(l) || len(l.waiting) > 0 && !before(js.job, l.waiting[0].job) {
			return true
		}
	}
	return false
}

// enqueue puts a new job (registered, not yet begun) in line for its
// limits and starts it if it can start now: at once, when every limit has
// room and nobody waits ahead of it (the common case costs no line).
// cancel_previous cancels the oldest running job of its task's key when it
// must wait for that.
func (e *Engine) enqueue(b *batch, js *jobState) {
	if !e.overLimit(js) {
		for _, id := range js.job.Queue.Slots {
			e.hold(e.limit(id, js), js)
		}
		e.beginJob(b, js)
		return
	}
	q := *js.job.Queue
	since := b.now
	q.Waiting, q.Since = true, &since
	js.job.Queue = &q
	js.job.Deadline = nil // the timeout counts from the start
	for _, id := range q.Slots {
		e.limit(id, js).line(js)
	}
	e.pump(b, q.Slots...)
	if !js.job.Queue.Waiting || js.task.Concurrency == nil || js.task.Concurrency.OnLimit != workflow.OnLimitCancelPrevious || !q.Keyed {
		return
	}
	key := taskLimitID(js.job.Workspace, js.job.TaskName, q.Key)
	if l, ok := e.st.slots.m[key]; ok && slices.Contains(q.Slots, key) && !e.hasRoom(l) && len(l.holders) > 0 {
		prev := l.oldest()
		e.stopJob(b, prev, JobCancelled, fmt.Sprintf("cancelled by a newer job %s of the same concurrency key (on_limit: cancel_previous)", js.job.ID))
	}
}

// hold gives js a slot of l.
func (e *Engine) hold(l *slotLimit, js *jobState) {
	e.st.slots.started++
	l.holders[js] = e.st.slots.started
}

// oldest is the holder of l that took its slot first.
func (l *slotLimit) oldest() *jobState {
	var first *jobState
	for js, n := range l.holders {
		if first == nil || n < l.holders[first] {
			first = js
		}
	}
	return first
}

// line adds a job to the limit's line, in order.
func (l *slotLimit) line(js *jobState) {
	i := sort.Search(len(l.waiting), func(i int) bool { return before(js.job, l.waiting[i].job) })
	l.waiting = slices.Insert(l.waiting, i, js)
}

// place is the job's 1-based place in the limit's line, 0 if not in it.
func (l *slotLimit) place(js *jobState) int {
	i := sort.Search(len(l.waiting), func(i int) bool { return !before(l.waiting[i].job, js.job) })
	if i < len(l.waiting) && l.waiting[i] == js {
		return i + 1
	}
	if i := slices.Index(l.waiting, js); i >= 0 { // its priority changed under the search
		return i + 1
	}
	return 0
}

func (l *slotLimit) unline(js *jobState) {
	if i := l.place(js); i > 0 {
		l.waiting = slices.Delete(l.waiting, i-1, i)
	}
}

// pump starts the waiters of the given limits that can start, in line,
// while the limits have room; what they set off is pumped too.
func (e *Engine) pump(b *batch, ids ...string) {
	s := e.st.slots
	s.dirty = append(s.dirty, ids...)
	if s.pumping {
		return
	}
	s.pumping = true
	defer func() { s.pumping = false }()
	for len(s.dirty) > 0 {
		id := s.dirty[0]
		s.dirty = s.dirty[1:]
		l, ok := s.m[id]
		if !ok {
			continue
		}
		for i := 0; i < len(l.waiting) && e.hasRoom(l); {
			if w := l.waiting[i]; e.canStart(w) {
				// What the start sets off may change the line (a job
				// that ends at once, a cancel): look from the front.
				e.startQueued(b, w)
				i = 0
				continue
			}
			i++
		}
		e.dropIdle(l)
	}
}

// startQueued gives a waiting job its slots and begins it.
func (e *Engine) startQueued(b *batch, js *jobState) {
	q := *js.job.Queue
	if q.Since != nil && !q.Since.Equal(b.now) {
		b.waited = append(b.waited, queueWait{queueLabel(js), b.now.Sub(*q.Since)})
	}
	q.Waiting, q.Since = false, nil
	js.job.Queue = &q
	for _, id := range q.Slots {
		l := e.limit(id, js)
		l.unline(js)
		e.hold(l, js)
	}
	b.dirtyJob(js.job)
	if js.task.Timeout > 0 {
		d := b.now.Add(time.Duration(js.task.Timeout))
		js.job.Deadline = &d
	}
	e.beginJob(b, js)
}

// releaseSlots is a job's end, for its limits: it leaves the lines it
// waited in, or frees the slots it held and the next in line start.
func (e *Engine) releaseSlots(b *batch, js *jobState) {
	q := js.job.Queue
	if q == nil {
		return
	}
	if q.Waiting {
		c := *q
		c.Waiting, c.Since = false, nil
		js.job.Queue = &c
		for _, id := range q.Slots {
			if l, ok := e.st.slots.m[id]; ok {
				l.unline(js)
				e.dropIdle(l)
			}
		}
		return
	}
	for _, id := range q.Slots {
		if l, ok := e.st.slots.m[id]; ok {
			delete(l.holders, js)
		}
	}
	e.pump(b, q.Slots...)
}

// dropIdle forgets a limit nobody holds or waits for: idle keys cost no
// memory.
func (e *Engine) dropIdle(l *slotLimit) {
	if len(l.holders) == 0 && len(l.waiting) == 0 && e.st.slots.m[l.id] == l {
		delete(e.st.slots.m, l.id)
	}
}

// restoreSlots puts a loaded job back in its lines, or among the holders
// of its slots (load: jobs in creation order).
func (e *Engine) restoreSlots(js *jobState) {
	if js.job.Queue == nil {
		return
	}
	q := *js.job.Queue
	q.Slots = nil
	js.job.Queue = &q
	js.within = q.Within
	q.Slots = neededSlots(js.job)
	for _, id := range q.Slots {
		l := e.limit(id, js)
		if q.Waiting {
			l.line(js)
		} else {
			e.hold(l, js)
		}
	}
}

// pumpAll starts whoever can start after a load (a limit raised meanwhile).
func (e *Engine) pumpAll(b *batch) {
	ids := make([]string, 0, len(e.st.slots.m))
	for id := range e.st.slots.m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	e.pump(b, ids...)
}

// position is a waiting job's place in line: its worst place among its
// limits' lines. 0 when it does not wait.
func (e *Engine) position(js *jobState) int {
	q := js.job.Queue
	if q == nil || !q.Waiting {
		return 0
	}
	pos := 0
	for _, id := range q.Slots {
		if l, ok := e.st.slots.m[id]; ok {
			pos = max(pos, l.place(js))
		}
	}
	return pos
}

// queueLabel names the job's line for metrics: its queue, or its task's
// limit (workspace/task; keys are not a bounded set).
func queueLabel(js *jobState) string {
	if js.job.Queue.Name != "" {
		return js.job.Queue.Name
	}
	return js.job.Workspace + "/" + js.job.TaskName
}

// queueWait is how long a job waited for its slots, for metrics.
type queueWait struct {
	queue  string
	waited time.Duration
}

// QueueMetrics is a Metrics that also observes queued jobs' waits.
type QueueMetrics interface {
	QueueWaited(queue string, waited time.Duration)
}

// heldBy lists the limits a job holds or runs within, which its hook jobs
// run within. Read off the loop by a hook's build: the job has ended, so
// neither changes any more.
func heldBy(js *jobState) []string {
	q := js.job.Queue
	if q == nil {
		return slices.Clone(js.within)
	}
	out := slices.Clone(q.Within)
	if !q.Waiting {
		out = append(out, neededSlots(js.job)...)
	}
	return out
}

// insertOverLimit commits a new job of a task with `on_limit: skip` whose
// limit is reached as a skipped record only, as a trigger's skip does.
func (e *Engine) insertOverLimit(b *batch, js *jobState) *Job {
	now := b.now
	js.job.Status = JobSkipped
	js.job.CompletedAt = &now
	js.job.Deadline = nil
	b.dirtyJob(js.job)
	what := "the concurrency limit of task " + js.job.TaskName
	if q := js.job.Queue; q.Keyed && q.Key != "" {
		what += " for key " + strconv.Quote(q.Key)
	}
	if js.job.Queue.Name != "" {
		what += " or queue " + js.job.Queue.Name
	}
	b.serverLog(js.job.ID, "skipped: "+what+" is reached (on_limit: skip)")
	b.finished = append(b.finished, js)
	b.newJobs = append(b.newJobs, js.job)
	b.endedJobs = append(b.endedJobs, js.job)
	c := *js.job
	return &c
}
