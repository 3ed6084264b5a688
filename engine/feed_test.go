package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/engine/enginetest"
)

// A job's life reaches a subscriber as created, running, then its end,
// each once, in order; a status-neutral change sends nothing.
func TestFeedReportCreationAndEachStatusOnce(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	sub := f.Engine.SubscribeFeed(0)
	defer sub.Close()
	job := f.Execute("t", nil)
	f.RunStep("a", enginetest.Ok(nil))
	f.RunStep("b", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)

	var got []string
	for len(got) < 3 {
		select {
		case ev := <-sub.Items():
			if ev.Job.ID != job {
				t.Fatalf("event of job %s, want %s", ev.Job.ID, job)
			}
			if ev.Job.Input != nil || ev.Job.Output != nil {
				t.Errorf("event carries input or output: %+v", ev.Job)
			}
			got = append(got, ev.Change+":"+ev.Job.Status)
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v; want 3", got)
		}
	}
	want := fmt.Sprint([]string{"created:pending", "status:running", "status:completed"})
	if fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %s", got, want)
	}
	select {
	case ev := <-sub.Items():
		t.Fatalf("extra event %s:%s", ev.Change, ev.Job.Status)
	default:
	}
	if sub.Lost() {
		t.Error("a reading subscriber is marked lost")
	}
	// A stopping engine ends its subscriptions (an HTTP server shutting
	// down then has no stream left to wait for), not as lost.
	f.Stop()
	if _, open := <-sub.Items(); open || sub.Lost() {
		t.Fatalf("after Stop: events open %v, lost %v", open, sub.Lost())
	}
	if _, open := <-f.Engine.SubscribeFeed(0).Items(); open {
		t.Fatal("a subscription to a stopped engine is open")
	}
}

// A subscriber that never reads does not hold the loop up: 200 jobs run to
// completion, the stalled subscriber is dropped and told (Lost), and a
// reading subscriber gets every event.
func TestSlowJobSubscriberDoesNotStallJobs(t *testing.T) {
	f := enginetest.New(t, flowYAML(`only: {action: ok}`))
	stalled := f.Engine.SubscribeFeed(4)
	defer stalled.Close()
	reader := f.Engine.SubscribeFeed(2000)
	defer reader.Close()

	const n = 200
	start := time.Now()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.Execute("t", nil)
		f.RunJobStep(ids[i], "only", enginetest.Ok(nil))
	}
	for _, id := range ids {
		f.WaitStatus(id, engine.JobCompleted)
	}
	t.Logf("%d jobs ran in %v with a stalled subscriber", n, time.Since(start))

	if !stalled.Lost() {
		t.Fatal("the stalled subscriber is not marked lost")
	}
	held := 0
	for range stalled.Items() { // closed: drains what it held, then ends
		held++
	}
	if held > 4 {
		t.Fatalf("stalled subscriber held %d events, buffer is 4", held)
	}
	ended := 0
	for ended < n {
		select {
		case ev, ok := <-reader.Items():
			if !ok {
				t.Fatalf("reader's events closed after %d ended jobs (lost %v)", ended, reader.Lost())
			}
			if ev.Job.Status == engine.JobCompleted {
				ended++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("reader got %d of %d completions", ended, n)
		}
	}
}

// A subscriber following one job gets its step changes in commit order
// (each step ready or later, running, completed; a's end before b's run)
// and its feed items, and nothing of another job; a list subscriber gets
// feed items only, never a step item.
func TestStepEventsReachOnlyTheJobsFollowers(t *testing.T) {
	f := enginetest.New(t, flowYAML(`
a: {action: ok}
b: {action: ok, depends_on: [a]}`))
	list := f.Engine.SubscribeFeed(0)
	defer list.Close()
	job := f.Execute("t", nil)
	other := f.Execute("t", nil)
	follower := f.Engine.SubscribeJobFeed(job, 0)
	defer follower.Close()
	f.RunJobStep(job, "a", enginetest.Ok(nil))
	f.RunJobStep(other, "a", enginetest.Ok(nil))
	f.RunJobStep(job, "b", enginetest.Ok(nil))
	f.WaitStatus(job, engine.JobCompleted)

	var got []string
	for done := false; !done; {
		select {
		case ev, ok := <-follower.Items():
			if !ok {
				t.Fatalf("follower's events closed (lost %v) after %v", follower.Lost(), got)
			}
			if ev.Job.ID != job {
				t.Fatalf("follower got an event of job %s: %s", ev.Job.ID, ev.Change)
			}
			switch ev.Change {
			case engine.StepChanged:
				if ev.Job.Workspace == "" || ev.Job.TaskName != "t" || ev.Step == nil {
					t.Fatalf("step event without its job's workspace and task or its step: %+v", ev)
				}
				if ev.Step.Status == engine.StepCompleted && ev.Step.CompletedAt == nil {
					t.Errorf("step %s completed without completed_at", ev.Step.Name)
				}
				got = append(got, ev.Step.Name+":"+ev.Step.Status)
			case engine.JobStatusChanged:
				got = append(got, "job:"+ev.Job.Status)
				done = ev.Job.Status == engine.JobCompleted
			default:
				t.Fatalf("follower got change %q", ev.Change)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("events so far %v; the job's completion never came", got)
		}
	}
	// Subscribed after the job was created and a became ready: a's first
	// event may be ready; then each change once, in order.
	at := map[string]int{}
	for i, e := range got {
		if _, dup := at[e]; dup {
			t.Fatalf("event %s twice in %v", e, got)
		}
		at[e] = i
	}
	order := []string{"a:running", "a:completed", "b:ready", "b:running", "b:completed", "job:completed"}
	for i, e := range order {
		if _, ok := at[e]; !ok {
			t.Fatalf("no %s in %v", e, got)
		}
		if i > 0 && at[e] < at[order[i-1]] {
			t.Fatalf("%s before %s in %v", e, order[i-1], got)
		}
	}
	t.Logf("follower's events: %v", got)

	f.WaitStatus(other, engine.JobRunning)
	jobs := 0
	for jobs < 4 { // both created, job running and completed
		select {
		case ev := <-list.Items():
			if ev.Change == engine.StepChanged || ev.Step != nil {
				t.Fatalf("list subscriber got a step event: %+v", ev)
			}
			jobs++
		case <-time.After(10 * time.Second):
			t.Fatalf("list subscriber got %d job events, want 4 at least", jobs)
		}
	}
	for {
		select {
		case ev := <-list.Items():
			if ev.Change == engine.StepChanged || ev.Step != nil {
				t.Fatalf("list subscriber got a step event: %+v", ev)
			}
		default:
			return
		}
	}
}

// A for_each of many instances, followed: a follower that keeps up gets
// the instances' changes, and one that fell behind (a commit of more
// changes than its buffer) subscribes again, as the API does (resync),
// and still sees the job end; a stalled follower is dropped without
// holding the job up; a list subscriber gets no step item.
func TestStepEventsOfABigForEach(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	f := enginetest.New(t, flowYAML(fmt.Sprintf(`
fan: {action: ok, for_each: [%s]}`, strings.Join(items, ", "))))
	list := f.Engine.SubscribeFeed(0)
	defer list.Close()
	start := time.Now()
	job := f.Execute("t", nil)
	stalled := f.Engine.SubscribeJobFeed(job, 4)
	defer stalled.Close()
	type tally struct{ steps, resyncs int }
	got := make(chan tally, 1)
	stop := make(chan struct{})
	reader := f.Engine.SubscribeJobFeed(job, 0)
	go func() {
		var c tally
		defer func() { reader.Close(); got <- c }()
		for {
			select {
			case ev, ok := <-reader.Items():
				if !ok {
					// As a page does on resync: subscribe again, then
					// refetch the job, which may have ended meanwhile.
					c.resyncs++
					reader = f.Engine.SubscribeJobFeed(job, 0)
					if j, _, err := f.Engine.Job(t.Context(), job); err == nil && j.Status == engine.JobCompleted {
						return
					}
					continue
				}
				if ev.Step != nil {
					c.steps++
				}
				if ev.Change == engine.JobStatusChanged && ev.Job.Status == engine.JobCompleted {
					return
				}
			case <-stop:
				return
			}
		}
	}()
	for i := range n {
		f.RunJobStep(job, fmt.Sprintf("fan[%d]", i), enginetest.Ok(nil))
	}
	f.WaitStatus(job, engine.JobCompleted)
	t.Logf("%d instances ran in %v, followed", n, time.Since(start))
	var c tally
	select {
	case c = <-got:
	case <-time.After(10 * time.Second):
		close(stop)
		c = <-got
		t.Fatalf("the follower never saw the job complete (%d step events, %d resyncs)", c.steps, c.resyncs)
	}
	t.Logf("the follower got %d step events and subscribed again %d times", c.steps, c.resyncs)
	// Events dropped with a lagging subscription are not sent again (the
	// page refetches the job instead), so only a follower that never fell
	// behind must have seen every instance.
	if c.steps == 0 || c.resyncs == 0 && c.steps < n {
		t.Errorf("the follower got %d step events of %d instances (%d resyncs)", c.steps, n, c.resyncs)
	}
	if !stalled.Lost() {
		t.Fatal("the stalled follower was not dropped")
	}
	for {
		select {
		case ev := <-list.Items():
			if ev.Step != nil {
				t.Fatalf("list subscriber got a step event: %+v", ev)
			}
		default:
			return
		}
	}
}
