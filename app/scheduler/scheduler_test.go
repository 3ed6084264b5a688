package scheduler_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/scheduler"
	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// opsWorkflow has one scheduler trigger t (cron and timezone filled in)
// beside triggers the scheduler must leave alone.
const opsWorkflow = `
tasks:
  job:
    input:
      k: {type: string}
    flow:
      run: {type: script, script: "true"}
triggers:
  t:
    type: scheduler
    cron: "%s"
    timezone: %s
    task: job
    input: {k: v}
    concurrency: skip
  off:
    type: scheduler
    cron: "* * * * * *"
    task: job
    enabled: false
  hook:
    type: webhook
    name: incoming
    task: job
`

func TestSchedulerFiresAtEachCronTimeAcrossDST(t *testing.T) {
	tests := []struct {
		name  string
		cron  string
		tz    string
		start string
		want  []string
	}{
		{
			// 02:30 does not exist on 2025-03-30 in Berlin: it fires at 03:00 CEST.
			name: "berlin daily through the spring-forward gap", cron: "30 2 * * *", tz: "Europe/Berlin",
			start: "2025-03-28T12:00:00Z",
			want:  []string{"2025-03-29T01:30:00Z", "2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"},
		},
		{
			// 02:30 happens twice on 2025-10-26 in Berlin: it fires at the first.
			name: "berlin daily through the fall-back overlap", cron: "30 2 * * *", tz: "Europe/Berlin",
			start: "2025-10-25T12:00:00Z",
			want:  []string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"},
		},
		{
			name: "new york hourly fires the repeated 01:30 once", cron: "30 * * * *", tz: "America/New_York",
			start: "2025-11-02T04:45:00Z",
			want:  []string{"2025-11-02T05:30:00Z", "2025-11-02T07:30:00Z", "2025-11-02T08:30:00Z"},
		},
		{
			name: "six fields fire on seconds", cron: "*/20 * * * * *", tz: "UTC",
			start: "2025-01-01T00:00:05Z",
			want:  []string{"2025-01-01T00:00:20Z", "2025-01-01T00:00:40Z", "2025-01-01T00:01:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock(at(tt.start))
			state := newState()
			jobs := &fakeJobs{clock: clock, state: state}
			start(t, scheduler.Config{
				Workspaces: newWorkspaces(loadWS(t, "ops", fmt.Sprintf(opsWorkflow, tt.cron, tt.tz))),
				Jobs:       jobs, State: state, Clock: clock,
			})
			seq := 0
			for i, w := range tt.want {
				var due time.Time
				due, seq = clock.armed(t, seq)
				if !due.Equal(at(w)) {
					t.Fatalf("fire %d: timer due %s, want %s", i, due.Format(time.RFC3339), w)
				}
				clock.Set(due)
				c := jobs.wait(t, i+1)[i]
				if !c.at.Equal(due) {
					t.Errorf("fire %d: job asked for at %s, want %s", i, c.at, due)
				}
				// Recorded once the job exists, before the next timer.
				eventually(t, func() string {
					return fmt.Sprintf("fire %d: last fire recorded %s, want %s", i, state.get("ops/t"), due)
				}, func() bool { return state.get("ops/t").Equal(due) })
			}
			c := jobs.made()[0]
			want := engine.CreateJob{Workspace: "ops", Task: "job", Input: map[string]any{"k": "v"}, SourceType: engine.SourceTrigger, SourceID: ptr("ops/t"),
				Fire: &engine.TriggerFire{Workspace: "ops", Trigger: "t", At: at(tt.want[0])}}
			if !reflect.DeepEqual(c.req, want) || c.concurrency != engine.ConcurrencySkip {
				t.Errorf("job request = %+v (source id %s) under %q, want %+v under skip", c.req, deref(c.req.SourceID), c.concurrency, want)
			}
			if n := len(jobs.made()); n != len(tt.want) {
				t.Errorf("%d jobs, want %d: disabled and webhook triggers must not fire", n, len(tt.want))
			}
			if w := state.written()[0]; w != "ops/t@"+tt.start {
				t.Errorf("first state write = %s, want the schedule's start recorded", w)
			}
		})
	}
}

const everyFive = `
tasks:
  job:
    flow:
      run: {type: script, script: "true"}
triggers:
  five:
    type: scheduler
    cron: "*/5 * * * *"
    task: job
`

func TestSchedulerFiresAMissedTriggerOnceAtStartUp(t *testing.T) {
	tests := []struct {
		name      string
		last      string // persisted last fire; "" = none
		now       string
		wantFires []string // fired at once at start-up
		wantNext  string
		wantState string
	}{
		{
			name: "many missed slots fire once", last: "2025-01-01T00:00:00Z", now: "2025-01-01T10:02:00Z",
			wantFires: []string{"2025-01-01T10:02:00Z"}, wantNext: "2025-01-01T10:05:00Z", wantState: "2025-01-01T10:02:00Z",
		},
		{
			name: "a slot missed by seconds fires", last: "2025-01-01T09:55:00Z", now: "2025-01-01T10:00:01Z",
			wantFires: []string{"2025-01-01T10:00:01Z"}, wantNext: "2025-01-01T10:05:00Z", wantState: "2025-01-01T10:00:01Z",
		},
		{
			name: "nothing missed waits for the next slot", last: "2025-01-01T09:55:00Z", now: "2025-01-01T09:57:00Z",
			wantNext: "2025-01-01T10:00:00Z", wantState: "2025-01-01T09:55:00Z",
		},
		{
			name: "a trigger never seen starts from now", now: "2025-01-01T10:02:00Z",
			wantNext: "2025-01-01T10:05:00Z", wantState: "2025-01-01T10:02:00Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock(at(tt.now))
			state := newState()
			jobs := &fakeJobs{clock: clock, state: state}
			if tt.last != "" {
				state.last["ops/five"] = at(tt.last)
			}
			start(t, scheduler.Config{Workspaces: newWorkspaces(loadWS(t, "ops", everyFive)), Jobs: jobs, State: state, Clock: clock})
			due, _ := clock.armed(t, 0)
			if !due.Equal(at(tt.wantNext)) {
				t.Errorf("next fire %s, want %s", due.Format(time.RFC3339), tt.wantNext)
			}
			var fired []string
			for _, c := range jobs.made() {
				fired = append(fired, c.at.Format(time.RFC3339))
			}
			if !slices.Equal(fired, tt.wantFires) {
				t.Errorf("fired at start-up %v, want %v", fired, tt.wantFires)
			}
			if got := state.get("ops/five"); !got.Equal(at(tt.wantState)) {
				t.Errorf("recorded %s, want %s", got.Format(time.RFC3339), tt.wantState)
			}
		})
	}
}

func TestSchedulerRestartFiresWhatFellDueWhileItWasDown(t *testing.T) {
	clock := newClock(at("2025-01-01T10:01:00Z"))
	state := newState()
	jobs := &fakeJobs{clock: clock, state: state}
	cfg := scheduler.Config{Workspaces: newWorkspaces(loadWS(t, "ops", everyFive)), Jobs: jobs, State: state, Clock: clock}

	stop := start(t, cfg)
	due, seq := clock.armed(t, 0)
	clock.Set(due) // 10:05
	jobs.wait(t, 1)
	clock.armed(t, seq)
	stop()

	// Down from 10:05 to 12:31: 29 slots missed, one fire owed.
	clock.Set(at("2025-01-01T12:31:00Z"))
	before := clock.created()
	start(t, cfg)
	next, _ := clock.armed(t, before)
	calls := jobs.wait(t, 2)
	if len(calls) != 2 || !calls[1].at.Equal(at("2025-01-01T12:31:00Z")) {
		t.Fatalf("jobs after restart: %d, last at %s; want one more at 12:31", len(calls), calls[len(calls)-1].at)
	}
	if !next.Equal(at("2025-01-01T12:35:00Z")) {
		t.Errorf("next fire after restart %s, want 12:35", next.Format(time.RFC3339))
	}
}

const reloadBefore = `
tasks:
  job:
    input:
      v: {type: integer}
    flow:
      run: {type: script, script: "true"}
triggers:
  same:    {type: scheduler, cron: "0 * * * *", task: job, input: {v: 1}}
  recron:  {type: scheduler, cron: "0 12 * * *", task: job}
  gone:    {type: scheduler, cron: "45 * * * *", task: job}
  paused:  {type: scheduler, cron: "50 * * * *", task: job}
`

const reloadAfter = `
tasks:
  job:
    input:
      v: {type: integer}
    flow:
      run: {type: script, script: "true"}
triggers:
  same:    {type: scheduler, cron: "0 * * * *", task: job, input: {v: 2}}
  recron:  {type: scheduler, cron: "20 10 * * *", task: job}
  paused:  {type: scheduler, cron: "50 * * * *", task: job, enabled: false}
  added:   {type: scheduler, cron: "15 10 * * *", task: job}
`

func TestSchedulerPicksUpHotReloadedTriggers(t *testing.T) {
	clock := newClock(at("2025-01-01T10:10:00Z"))
	state := newState()
	jobs := &fakeJobs{clock: clock, state: state}
	wss := newWorkspaces(loadWS(t, "ops", reloadBefore))
	start(t, scheduler.Config{Workspaces: wss, Jobs: jobs, State: state, Clock: clock})

	due, seq := clock.armed(t, 0)
	if !due.Equal(at("2025-01-01T10:45:00Z")) {
		t.Fatalf("first fire %s, want 10:45 (gone)", due.Format(time.RFC3339))
	}
	writesBefore := len(state.written())
	wss.set(loadWS(t, "ops", reloadAfter))

	// Through 11:00: added at 10:15, recron on its new cron at 10:20, and
	// same at 11:00 with its new input; gone and paused never fire.
	want := []struct {
		at, source string
		input      map[string]any
	}{
		{"2025-01-01T10:15:00Z", "ops/added", map[string]any{}},
		{"2025-01-01T10:20:00Z", "ops/recron", map[string]any{}},
		{"2025-01-01T11:00:00Z", "ops/same", map[string]any{"v": 2}},
	}
	for i, w := range want {
		due, seq = clock.armed(t, seq)
		if !due.Equal(at(w.at)) {
			t.Fatalf("fire %d due %s, want %s (%s)", i, due.Format(time.RFC3339), w.at, w.source)
		}
		clock.Set(due)
		c := jobs.wait(t, i+1)[i]
		input := c.req.Input
		if input == nil {
			input = map[string]any{}
		}
		if deref(c.req.SourceID) != w.source || fmt.Sprint(input) != fmt.Sprint(w.input) {
			t.Errorf("fire %d: %s with input %v, want %s with %v", i, deref(c.req.SourceID), input, w.source, w.input)
		}
	}
	// The reload wrote the new schedules' start for recron and added only:
	// same kept its schedule.
	var got []string
	for _, w := range state.written()[writesBefore:] {
		if strings.HasSuffix(w, "@2025-01-01T10:10:00Z") {
			got = append(got, w)
		}
	}
	slices.Sort(got)
	if want := []string{"ops/added@2025-01-01T10:10:00Z", "ops/recron@2025-01-01T10:10:00Z"}; !slices.Equal(got, want) {
		t.Errorf("state writes on reload %v, want %v", got, want)
	}
}

func TestSchedulerKeepsGoingWhenAJobCannotBeCreated(t *testing.T) {
	clock := newClock(at("2025-01-01T10:01:00Z"))
	state := newState()
	jobs := &fakeJobs{clock: clock, state: state, fail: func(n int) error {
		if n == 1 {
			return fmt.Errorf("task %q: %w", "job", engine.ErrNotFound)
		}
		return nil
	}}
	start(t, scheduler.Config{Workspaces: newWorkspaces(loadWS(t, "ops", everyFive)), Jobs: jobs, State: state, Clock: clock})

	due, seq := clock.armed(t, 0)
	clock.Set(due) // 10:05 fails
	jobs.wait(t, 1)
	due, _ = clock.armed(t, seq)
	if !due.Equal(at("2025-01-01T10:10:00Z")) {
		t.Fatalf("after a failed fire the next is %s, want 10:10", due.Format(time.RFC3339))
	}
	if got := state.get("ops/five"); !got.Equal(at("2025-01-01T10:01:00Z")) {
		t.Errorf("a failed fire was recorded: last fire %s, want the 10:01 start", got.Format(time.RFC3339))
	}
	clock.Set(due)
	jobs.wait(t, 2)
	eventually(t, func() string { return "second fire not recorded" }, func() bool { return state.get("ops/five").Equal(due) })
}

func TestIdleSchedulerArmsNoTimer(t *testing.T) {
	clock := newClock(at("2025-01-01T10:00:00Z"))
	wss := newWorkspaces(loadWS(t, "ops", `
tasks:
  job: {flow: {run: {type: script, script: "true"}}}
triggers:
  hook: {type: webhook, name: incoming, task: job}
`))
	stop := start(t, scheduler.Config{Workspaces: wss, Jobs: &fakeJobs{clock: clock}, State: newState(), Clock: clock})
	eventually(t, func() string { return "workspaces never listed" }, func() bool { return wss.listed() > 0 })
	stop()
	if n := clock.created(); n != 0 {
		t.Errorf("an idle scheduler made %d timers, want none", n)
	}
}

func TestSchedulerRunNeedsItsParts(t *testing.T) {
	err := scheduler.New(scheduler.Config{}).Run(t.Context())
	if err == nil {
		t.Fatal("Run without workspaces, jobs or state succeeded")
	}
}

func TestSchedulerSkipPolicyRecordsSkippedJobsInTheEngine(t *testing.T) {
	f := enginetest.New(t, `
tasks:
  slow:
    flow:
      run: {type: script, script: "sleep 100"}
triggers:
  every-minute:
    type: scheduler
    cron: "* * * * *"
    task: slow
    concurrency: skip
`)
	clock := newClock(at("2025-01-01T00:00:30Z"))
	start(t, scheduler.Config{Workspaces: newWorkspaces(f.WS), Jobs: f.Engine, State: newState(), Clock: clock})

	seq := 0
	for range 2 {
		var due time.Time
		due, seq = clock.armed(t, seq)
		clock.Set(due)
	}
	clock.armed(t, seq)
	var jobs []*engine.Job
	f.Eventually(func() bool {
		var err error
		jobs, _, err = f.Engine.Jobs(t.Context(), engine.JobFilter{Workspace: enginetest.WorkspaceName})
		return err == nil && len(jobs) == 2
	}, func() string { return fmt.Sprintf("%d jobs, want 2", len(jobs)) })
	// Newest first: the second fire found the first still pending.
	statuses := []string{jobs[1].Status, jobs[0].Status}
	if !slices.Equal(statuses, []string{engine.JobPending, engine.JobSkipped}) {
		t.Errorf("statuses oldest first = %v, want [pending skipped]", statuses)
	}
	for _, j := range jobs {
		if j.SourceType != engine.SourceTrigger || deref(j.SourceID) != "main/every-minute" {
			t.Errorf("job %s source = %s %s, want trigger main/every-minute", j.ID, j.SourceType, deref(j.SourceID))
		}
	}
	if _, steps, err := f.Engine.Job(t.Context(), jobs[0].ID); err != nil || len(steps) != 0 {
		t.Errorf("skipped job has %d steps (err %v), want none", len(steps), err)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
