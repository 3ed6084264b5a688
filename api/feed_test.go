package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/openapitest"
)

// sseEvent is one event of a Server-Sent Events stream; a comment (the
// idle ping) has the name ":".
type sseEvent struct {
	name string
	data map[string]any
}

// openEvents follows GET /api/events with the token as ?token= (as a
// browser's EventSource sends it) and returns its events once `ready`.
func openEvents(t *testing.T, base, token string) <-chan sseEvent {
	t.Helper()
	return openEventsQuery(t, base, token, "")
}

// openEventsQuery is openEvents with more of the query (e.g. "&job_id=…").
func openEventsQuery(t *testing.T, base, token, query string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/api/events?token="+token+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	client := &http.Client{Transport: openapitest.Transport(nil)}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /api/events: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/events: %d", resp.StatusCode)
	}
	out := make(chan sseEvent, 100)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.name = ":"
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data)
			}
		}
	}()
	if ev := next(t, out); ev.name != "ready" {
		t.Fatalf("first event %q, want ready", ev.name)
	}
	return out
}

func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("event stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return sseEvent{}
}

// nextJob skips pings up to the next job event.
func nextJob(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	for {
		if ev := next(t, events); ev.name != ":" {
			return ev
		}
	}
}

// The event stream filters each event by the ACL: the viewer gets the
// jobs of hello and nothing of other, the denied user nothing at all,
// the admin everything; and no event carries input.
func TestFeedHideDeniedTasks(t *testing.T) {
	f := newACLFixture(t, func(c *fixtureConfig) { c.EventsPing = 50 * time.Millisecond })
	adminEv := openEvents(t, f.url, f.tokens[roleAdmin])
	viewEv := openEvents(t, f.url, f.tokens[roleView])
	denyEv := openEvents(t, f.url, f.tokens[roleDeny])

	var others []string
	for range 3 {
		others = append(others, f.run("other"))
	}
	hello := f.run("hello")

	for i, want := range append(others, hello) {
		ev := nextJob(t, adminEv)
		if ev.name != "job" || ev.data["job_id"] != want || ev.data["change"] != "created" {
			t.Fatalf("admin event %d: %s %v; want job %s created", i, ev.name, ev.data, want)
		}
		// Small messages: the list fields of a job (FeedItem), no input
		// or output.
		assertKeys(t, "job event", ev.data, "change", "job_id", "workspace", "task_name", "mode", "status",
			"source_type", "source_id", "revision", "created_at", "started_at", "completed_at")
	}
	// Events reach a stream in commit order, so the viewer's first job
	// event coming after the three of other shows those were withheld.
	ev := nextJob(t, viewEv)
	if ev.name != "job" || ev.data["job_id"] != hello || ev.data["task_name"] != "hello" || ev.data["status"] != "pending" {
		t.Fatalf("viewer's first event: %s %v; want hello's job %s", ev.name, ev.data, hello)
	}
	// The denied user's stream: a ping written after the events were all
	// queued (two pings: the first may race them) and no job before it.
	for pings := 0; pings < 2; {
		ev := next(t, denyEv)
		if ev.name != ":" {
			t.Fatalf("denied user got %s %v", ev.name, ev.data)
		}
		pings++
	}
}

// Without Accept: text/event-stream the stream refuses with 406 (as JSON),
// and without a token with 401.
func TestFeedNeedsEventStreamAccept(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/api/events", nil, nil)
	if r.status != http.StatusNotAcceptable || !strings.Contains(string(r.body), "text/event-stream") {
		t.Fatalf("GET /api/events without Accept: %d %s", r.status, r.body)
	}
	a := newACLFixture(t)
	r = a.do("GET", "/api/events", nil, map[string]string{"Accept": "text/event-stream"})
	if r.status != http.StatusUnauthorized {
		t.Fatalf("GET /api/events without token: %d %s", r.status, r.body)
	}
}

// ?job_id= follows one job: a job the caller may not view is unknown
// (404, as the job's detail), and a viewer of it gets its step changes
// and its own feed items, in order, and nothing of another job.
func TestFeedFollowOneJobUnderTheACL(t *testing.T) {
	f := newACLFixture(t, func(c *fixtureConfig) { c.EventsPing = 50 * time.Millisecond })
	other := f.run("other")
	hello := f.run("hello")
	stream := map[string]string{"Accept": "text/event-stream"}
	for _, c := range []struct {
		role int
		job  string
	}{{roleDeny, other}, {roleDeny, hello}, {roleView, other}, {roleAdmin, "not-a-job"}, {roleAdmin, "0190c5b2-0000-7000-8000-000000000000"}} {
		r := f.do("GET", "/api/events?job_id="+c.job+"&token="+f.tokens[c.role], nil, stream)
		r.expectError(http.StatusNotFound, "job")
	}

	events := openEventsQuery(t, f.url, f.tokens[roleView], "&job_id="+hello)
	w := f.register("w")
	f.runStep(w, other, "only", map[string]any{}) // claims take the oldest job first
	f.runStep(w, hello, "say", map[string]any{})
	f.runStep(w, hello, "after", map[string]any{})
	var got []string
	for done := false; !done; {
		ev := nextJob(t, events)
		if ev.data["job_id"] != hello {
			t.Fatalf("follower of %s got %s %v", hello, ev.name, ev.data)
		}
		switch ev.name {
		case "step":
			assertKeys(t, "step event", ev.data, "job_id", "workspace", "task_name", "step_name", "status",
				"worker_id", "started_at", "completed_at", "attempt")
			got = append(got, ev.data["step_name"].(string)+":"+ev.data["status"].(string))
		case "job":
			got = append(got, "job:"+ev.data["status"].(string))
			done = ev.data["status"] == "completed"
		default:
			t.Fatalf("follower got %s %v", ev.name, ev.data)
		}
	}
	// say was ready before the stream began: its first record write after
	// subscribing may report it so.
	if len(got) > 0 && got[0] == "say:ready" {
		got = got[1:]
	}
	want := "[say:running job:running say:completed after:ready after:running after:completed job:completed]"
	if s := fmt.Sprint(got); s != want {
		t.Fatalf("events %s, want %s", s, want)
	}
}
