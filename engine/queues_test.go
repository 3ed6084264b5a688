package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

const queuesYAML = `
actions:
  again: {type: task, task: nested}
  call-middle: {type: task, task: middle}
  call-web: {type: task, task: web}
  call-announce: {type: task, task: announce}
tasks:
  deploy:
    input:
      env: {type: string, required: true}
      priority: {type: integer, default: 0}
    timeout: 1h
    concurrency: {limit: 1, key: "{{ input.env }}", priority: "{{ input.priority }}"}
    flow:
      ship: {type: script, script: echo ship}
  build:
    concurrency: {limit: 2}
    flow:
      make: {type: script, script: echo make}
  poll:
    concurrency: {limit: 1, on_limit: skip}
    flow:
      look: {type: script, script: echo look}
  preview:
    input:
      branch: {type: string, required: true}
    concurrency: {limit: 1, key: "{{ input.branch }}", on_limit: cancel_previous}
    flow:
      show: {type: script, script: echo show}
  web:
    queue: deploys
    flow:
      up: {type: script, script: echo web}
  api:
    queue: deploys
    concurrency: {limit: 5, key: "{{ input.env }}"}
    input:
      env: {type: string, default: prod}
    flow:
      up: {type: script, script: echo api}
  release:
    queue: deploys
    flow:
      up: {type: script, script: echo release}
    on_success: [{action: call-announce}]
  announce:
    queue: deploys
    flow:
      say: {type: script, script: echo announce}
  outer:
    queue: deploys
    flow:
      call: {action: call-middle}
  middle:
    flow:
      call: {action: call-web}
  nested:
    input:
      depth: {type: integer, default: 0}
    concurrency: {limit: 1}
    queue: deploys
    flow:
      inner:
        when: "{{ input.depth < 1 }}"
        action: again
        input: {depth: "{{ input.depth + 1 }}"}
      leaf: {type: script, script: echo leaf, depends_on: [inner], continue_on_failure: true}
`

func newQueues(t *testing.T) *enginetest.Fixture {
	return enginetest.NewWith(t, enginetest.LoadWorkspace(t, queuesYAML), enginetest.Options{Queues: map[string]int{"deploys": 1, "idle": 4}})
}

// queued returns the job's place in line, failing when it does not wait.
func queued(t *testing.T, f *enginetest.Fixture, id string) *engine.JobQueue {
	t.Helper()
	j := f.Job(id)
	if !j.Queued() || j.Status != engine.JobPending {
		t.Fatalf("job %s (%s) is %s with queue %+v, want pending in line", id, j.TaskName, j.Status, j.Queue)
	}
	return j.Queue
}

func notQueued(t *testing.T, f *enginetest.Fixture, id string) {
	t.Helper()
	if j := f.Job(id); j.Queued() {
		t.Fatalf("job %s (%s) waits in line (%+v), want it started", id, j.TaskName, j.Queue)
	}
}

func TestLimitOneRunsOneJobPerKeyAndStartsTheNextWhenItEnds(t *testing.T) {
	f := newQueues(t)
	prod1 := f.Execute("deploy", map[string]any{"env": "prod"})
	prod2 := f.Execute("deploy", map[string]any{"env": "prod"})
	staging := f.Execute("deploy", map[string]any{"env": "staging"})
	notQueued(t, f, prod1)
	notQueued(t, f, staging)
	q := queued(t, f, prod2)
	if q.Key != "prod" || q.Position != 1 {
		t.Fatalf("queue = %+v, want key prod, position 1", q)
	}
	if s := f.Step(prod2, "ship").Status; s != engine.StepPending {
		t.Fatalf("a queued job's step is %s, want pending", s)
	}
	f.RunJobStep(prod1, "ship", enginetest.Ok(nil))
	f.WaitStatus(prod1, engine.JobCompleted)
	notQueued(t, f, prod2)
	f.RunJobStep(prod2, "ship", enginetest.Ok(nil))
	f.WaitStatus(prod2, engine.JobCompleted)
	f.RunJobStep(staging, "ship", enginetest.Ok(nil))
	f.WaitStatus(staging, engine.JobCompleted)
	assertIdle(t, f)
}

// assertIdle checks that no limit is left in memory once its jobs ended:
// only the configured queues are listed, empty.
func assertIdle(t *testing.T, f *enginetest.Fixture) {
	t.Helper()
	qs, err := f.Engine.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Name == "" || len(q.Running) > 0 || len(q.Queued) > 0 {
			t.Fatalf("an idle engine lists %+v", q)
		}
	}
}

func TestQueuedJobsStartByPriorityThenCreation(t *testing.T) {
	f := newQueues(t)
	first := f.Execute("deploy", map[string]any{"env": "prod"})
	low := f.Execute("deploy", map[string]any{"env": "prod", "priority": -5})
	a := f.Execute("deploy", map[string]any{"env": "prod"})
	urgent := f.Execute("deploy", map[string]any{"env": "prod", "priority": 100})
	b := f.Execute("deploy", map[string]any{"env": "prod"})
	want := []string{urgent, a, b, low}
	for i, id := range want {
		if q := queued(t, f, id); q.Position != i+1 {
			t.Fatalf("job %d in line is at position %d, want %d", i, q.Position, i+1)
		}
	}
	page, total, err := f.Engine.Jobs(context.Background(), engine.JobFilter{Queued: true})
	if err != nil || total != 4 || len(page) != 4 {
		t.Fatalf("queued list: %d of %d, err %v", len(page), total, err)
	}
	for i, j := range page {
		if j.ID != want[i] || j.Queue.Position != i+1 {
			t.Fatalf("queued list item %d is %s at %d, want %s", i, j.ID, j.Queue.Position, want[i])
		}
	}
	prev := first
	for _, id := range want {
		f.RunJobStep(prev, "ship", enginetest.Ok(nil))
		notQueued(t, f, id)
		prev = id
	}
	f.RunJobStep(prev, "ship", enginetest.Ok(nil))
	assertIdle(t, f)
}

func TestOnLimitSkipCreatesTheJobSkipped(t *testing.T) {
	f := newQueues(t)
	running := f.Execute("poll", nil)
	skipped := f.Execute("poll", nil)
	j := f.Job(skipped)
	if j.Status != engine.JobSkipped || j.CompletedAt == nil {
		t.Fatalf("over the limit with on_limit skip: %s, want skipped", j.Status)
	}
	if lines := strings.Join(f.Logs.ServerLines(skipped), "\n"); !strings.Contains(lines, "on_limit: skip") {
		t.Fatalf("the skipped job's log does not say why: %q", lines)
	}
	f.RunJobStep(running, "look", enginetest.Ok(nil))
	f.WaitStatus(running, engine.JobCompleted)
	again := f.Execute("poll", nil)
	notQueued(t, f, again)
	if j := f.Job(again); j.Status == engine.JobSkipped {
		t.Fatal("a job with a free slot was skipped")
	}
}

func TestOnLimitCancelPreviousCancelsTheOldestRunningJobOfTheKey(t *testing.T) {
	f := newQueues(t)
	old := f.Execute("preview", map[string]any{"branch": "main"})
	f.ClaimJobStep(old, "show")
	if err := f.Engine.StartStep(context.Background(), f.Worker, old, "show"); err != nil {
		t.Fatal(err)
	}
	other := f.Execute("preview", map[string]any{"branch": "fix"})
	newer := f.Execute("preview", map[string]any{"branch": "main"})
	f.WaitStatus(old, engine.JobCancelled)
	notQueued(t, f, newer)
	notQueued(t, f, other)
	if j := f.Job(other); j.Status == engine.JobCancelled {
		t.Fatal("another key's job was cancelled")
	}
	f.RunJobStep(newer, "show", enginetest.Ok(nil))
	f.WaitStatus(newer, engine.JobCompleted)
}

func TestAJobTakesItsKeyAndQueueSlotsTogetherOrWaits(t *testing.T) {
	f := newQueues(t)
	web := f.Execute("web", nil)
	api := f.Execute("api", map[string]any{"env": "prod"})
	q := queued(t, f, api)
	if q.Name != "deploys" || q.Key != "prod" {
		t.Fatalf("queue = %+v, want queue deploys, key prod", q)
	}
	// It waits for the queue and holds no slot of its key meanwhile.
	qs, err := f.Engine.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range qs {
		if v.Task == "api" && len(v.Running) != 0 {
			t.Fatalf("a job waiting for its queue holds a slot of its key: %+v", v)
		}
		if v.Name == "deploys" && (v.Limit != 1 || len(v.Running) != 1 || v.Running[0].JobID != web || len(v.Queued) != 1) {
			t.Fatalf("deploys = %+v, want web running and api queued", v)
		}
	}
	f.RunJobStep(web, "up", enginetest.Ok(nil))
	notQueued(t, f, api)
	f.RunJobStep(api, "up", enginetest.Ok(nil))
	f.WaitStatus(api, engine.JobCompleted)
	assertIdle(t, f)
}

func TestAChildOfALimitOneTaskCallingTheSameTaskRunsWithinItsParentsSlot(t *testing.T) {
	f := newQueues(t)
	parent := f.Execute("nested", nil)
	var child string
	f.Eventually(func() bool { child = f.Step(parent, "inner").ChildJobID; return child != "" },
		func() string { return "the child job never started" })
	notQueued(t, f, child)
	// Its own inner step is skipped (depth 1), and so its leaf: it ends.
	f.WaitStatus(child, engine.JobCompleted)
	f.RunJobStep(parent, "leaf", enginetest.Ok(nil))
	f.WaitStatus(parent, engine.JobCompleted)
	assertIdle(t, f)
}

// A grandchild in its grandparent's queue runs within the grandparent's
// slot through a parent of a task with no limit, across a restart too.
func TestAGrandchildRunsWithinItsGrandparentsSlot(t *testing.T) {
	f := newQueues(t)
	outer := f.Execute("outer", nil)
	var middle, web string
	f.Eventually(func() bool { middle = f.Step(outer, "call").ChildJobID; return middle != "" },
		func() string { return "the middle job never started" })
	f.Eventually(func() bool { web = f.Step(middle, "call").ChildJobID; return web != "" },
		func() string { return "the web job never started" })
	f.Restart()
	notQueued(t, f, web)
	f.RunJobStep(web, "up", enginetest.Ok(nil))
	f.WaitStatus(outer, engine.JobCompleted)
	assertIdle(t, f)
}

// A hook job runs within the slot the job that fired it held: it does not
// queue behind the job that took that slot next.
func TestAHookJobRunsWithinTheFiringJobsSlot(t *testing.T) {
	f := newQueues(t)
	release := f.Execute("release", nil)
	next := f.Execute("web", nil)
	queued(t, f, next)
	f.RunJobStep(release, "up", enginetest.Ok(nil))
	f.WaitStatus(release, engine.JobCompleted)
	notQueued(t, f, next)
	page, _, err := f.Engine.Jobs(context.Background(), engine.JobFilter{Workspace: enginetest.WorkspaceName, TaskName: "announce"})
	if err != nil || len(page) != 1 {
		t.Fatalf("hook jobs: %d, %v", len(page), err)
	}
	hook := page[0]
	notQueued(t, f, hook.ID)
	f.RunJobStep(hook.ID, "say", enginetest.Ok(nil))
	f.WaitStatus(hook.ID, engine.JobCompleted)
	f.RunJobStep(next, "up", enginetest.Ok(nil))
	f.WaitStatus(next, engine.JobCompleted)
	assertIdle(t, f)
}

func TestQueuedJobsKeepTheirPlaceAcrossARestart(t *testing.T) {
	f := newQueues(t)
	first := f.Execute("deploy", map[string]any{"env": "prod"})
	second := f.Execute("deploy", map[string]any{"env": "prod"})
	urgent := f.Execute("deploy", map[string]any{"env": "prod", "priority": 9})
	f.ClaimJobStep(first, "ship")
	if err := f.Engine.StartStep(context.Background(), f.Worker, first, "ship"); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	// The in-process worker is gone: its step fails at start-up, the job
	// ends, and the first in line starts, not both.
	f.WaitStatus(first, engine.JobFailed)
	notQueued(t, f, urgent)
	if q := queued(t, f, second); q.Position != 1 {
		t.Fatalf("after the restart the second job is at %d, want 1", q.Position)
	}
	f.RunJobStep(urgent, "ship", enginetest.Ok(nil))
	notQueued(t, f, second)
	f.RunJobStep(second, "ship", enginetest.Ok(nil))
	f.WaitStatus(second, engine.JobCompleted)
	assertIdle(t, f)
}

func TestATasksTimeoutCountsFromTheJobsStartNotItsQueueing(t *testing.T) {
	f := newQueues(t)
	first := f.Execute("deploy", map[string]any{"env": "prod"})
	second := f.Execute("deploy", map[string]any{"env": "prod"})
	if j := f.Job(second); j.Deadline != nil {
		t.Fatalf("a queued job has a deadline %v", j.Deadline)
	}
	f.Clock.Advance(50 * time.Minute)
	f.RunJobStep(first, "ship", enginetest.Ok(nil))
	j := f.Job(second)
	if j.Deadline == nil || !j.Deadline.Equal(f.Clock.Now().Add(time.Hour)) {
		t.Fatalf("deadline = %v, want an hour after it started (%v)", j.Deadline, f.Clock.Now())
	}
	f.Clock.Advance(30 * time.Minute)
	if j := f.Job(second); j.Status == engine.JobCancelled {
		t.Fatal("the queued time counted toward the timeout")
	}
	f.RunJobStep(second, "ship", enginetest.Ok(nil))
}

func TestBadKeyOrPriorityFailsTheCreationNamingTheField(t *testing.T) {
	f := newQueues(t)
	cases := []struct {
		input map[string]any
		want  string
	}{
		{map[string]any{"env": "prod", "priority": 101}, "concurrency.priority: priority 101 is out of range"},
		{map[string]any{"env": " "}, "concurrency.key"},
		{map[string]any{"env": strings.Repeat("k", 300)}, "concurrency.key: rendered 300 bytes"},
	}
	for _, c := range cases {
		_, err := f.Engine.CreateJob(context.Background(), engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "deploy", Input: c.input})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("input %v: err = %v, want ErrInvalid with %q", c.input, err, c.want)
		}
	}
}

func TestAQueuedJobCanBeCancelledAndReprioritized(t *testing.T) {
	f := newQueues(t)
	first := f.Execute("build", nil)
	second := f.Execute("build", nil)
	a := f.Execute("build", nil)
	b := f.Execute("build", nil)
	c := f.Execute("build", nil)
	notQueued(t, f, second)
	if _, err := f.Engine.SetPriority(context.Background(), first, 5); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("priority of a running job: err %v, want ErrConflict", err)
	}
	if _, err := f.Engine.SetPriority(context.Background(), a, 101); !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("priority 101: err %v, want ErrInvalid", err)
	}
	j, err := f.Engine.SetPriority(context.Background(), c, 50)
	if err != nil || j.Queue.Position != 1 || j.Queue.Priority != 50 {
		t.Fatalf("set priority: %+v, %v", j, err)
	}
	if err := f.Engine.CancelJob(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	f.WaitStatus(a, engine.JobCancelled)
	if q := queued(t, f, b); q.Position != 2 {
		t.Fatalf("b is at %d, want 2 (behind the reprioritized job)", q.Position)
	}
	f.RunJobStep(first, "make", enginetest.Ok(nil))
	notQueued(t, f, c)
	queued(t, f, b)
	for _, id := range []string{second, c} {
		f.RunJobStep(id, "make", enginetest.Ok(nil))
	}
	notQueued(t, f, b)
	f.RunJobStep(b, "make", enginetest.Ok(nil))
	f.WaitStatus(b, engine.JobCompleted)
	assertIdle(t, f)
}

func TestQueuedJobsAreLiveForATriggersSkip(t *testing.T) {
	f := newQueues(t)
	f.Execute("deploy", map[string]any{"env": "prod"})
	src := "nightly"
	req := engine.CreateJob{Workspace: enginetest.WorkspaceName, Task: "deploy", Input: map[string]any{"env": "prod"},
		SourceType: engine.SourceTrigger, SourceID: &src}
	first, err := f.Engine.CreateTriggered(context.Background(), req, engine.ConcurrencySkip)
	if err != nil {
		t.Fatal(err)
	}
	queued(t, f, first.ID)
	second, err := f.Engine.CreateTriggered(context.Background(), req, engine.ConcurrencySkip)
	if err != nil || second.Status != engine.JobSkipped {
		t.Fatalf("a trigger's skip with its previous job queued: %v, %v", second, err)
	}
}

func TestQueueMetricsCountQueuedJobsAndTheirWait(t *testing.T) {
	m := &queueMetrics{}
	f := enginetest.NewWith(t, enginetest.LoadWorkspace(t, queuesYAML), enginetest.Options{Queues: map[string]int{"deploys": 1}, Metrics: m})
	web := f.Execute("web", nil)
	f.Execute("web", nil)
	st, err := f.Engine.Stats(context.Background())
	if err != nil || st.Queued["deploys"] != 1 {
		t.Fatalf("stats queued = %v, %v; want deploys 1", st.Queued, err)
	}
	f.Clock.Advance(3 * time.Second)
	f.RunJobStep(web, "up", enginetest.Ok(nil))
	f.Eventually(func() bool { return m.get() != "" }, func() string { return "no wait observed" })
	if got := m.get(); got != "deploys 3s" {
		t.Fatalf("observed %q, want deploys 3s", got)
	}
}

type queueMetrics struct {
	recordedMetrics
	waitedMu sync.Mutex
	waited   []string
}

func (m *queueMetrics) QueueWaited(queue string, waited time.Duration) {
	m.waitedMu.Lock()
	defer m.waitedMu.Unlock()
	m.waited = append(m.waited, fmt.Sprintf("%s %s", queue, waited))
}

func (m *queueMetrics) get() string {
	m.waitedMu.Lock()
	defer m.waitedMu.Unlock()
	return strings.Join(m.waited, ", ")
}

// A reload that lowers a limit applies to the next start: the jobs
// running go on, and the line moves only once they are under the new one.
func TestAReloadedLimitAppliesToTheNextStart(t *testing.T) {
	f := newQueues(t)
	a := f.Execute("build", nil)
	b := f.Execute("build", nil)
	c := f.Execute("build", nil)
	queued(t, f, c)
	lowered := enginetest.LoadWorkspace(t, strings.Replace(queuesYAML, "concurrency: {limit: 2}", "concurrency: {limit: 1}", 1))
	if lowered.Revision == f.WS.Revision {
		t.Fatal("the edit did not change the revision")
	}
	f.Workspaces.Add(lowered)
	f.RunJobStep(a, "make", enginetest.Ok(nil))
	f.WaitStatus(a, engine.JobCompleted)
	notQueued(t, f, b)
	queued(t, f, c)
	f.RunJobStep(b, "make", enginetest.Ok(nil))
	notQueued(t, f, c)
	f.RunJobStep(c, "make", enginetest.Ok(nil))
	f.WaitStatus(c, engine.JobCompleted)
	assertIdle(t, f)
}

// The feed tells a live list a queued job's place when it is created, and
// when it leaves the line, though it stays pending until its step starts.
func TestTheFeedCarriesAQueuedJobsPlaceAndItsStart(t *testing.T) {
	f := newQueues(t)
	first := f.Execute("build", nil)
	f.Execute("build", nil)
	sub := f.Engine.SubscribeFeed(0)
	defer sub.Close()
	third := f.Execute("build", nil)
	f.RunJobStep(first, "make", enginetest.Ok(nil))
	var got []string
	for len(got) < 2 {
		select {
		case ev := <-sub.Items():
			if ev.Job.ID != third {
				continue
			}
			place := "-"
			if ev.Job.Queue != nil && ev.Job.Queued() {
				place = fmt.Sprint(ev.Job.Queue.Position)
			}
			got = append(got, ev.Change+":"+ev.Job.Status+":"+place)
		case <-time.After(10 * time.Second):
			t.Fatalf("events of the queued job so far %v; want 2", got)
		}
	}
	if want := "[created:pending:1 status:pending:-]"; fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}
