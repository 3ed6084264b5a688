package api_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWorkerEndpointsRequireTheToken(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name   string
		header map[string]string
	}{
		{"missing", nil},
		{"wrong", map[string]string{"Authorization": "Bearer nope"}},
		{"prefix of the right one", map[string]string{"Authorization": "Bearer " + workerToken[:4]}},
		{"not a bearer", map[string]string{"Authorization": "Basic " + workerToken}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).do("POST", "/worker/register", map[string]any{"name": "w"}, tt.header).expect(401).errorMessage()
			f.in(t).do("GET", "/worker/workspace/main.tar.gz", nil, tt.header).expect(401).errorMessage()
		})
	}
}

func TestWorkerEndpointsAreClosedWithoutAServerToken(t *testing.T) {
	f := newFixture(t, withoutWorkerToken())
	f.do("POST", "/worker/register", map[string]any{"name": "w"}, map[string]string{"Authorization": "Bearer "}).expect(401)
	f.worker("POST", "/worker/register", map[string]any{"name": "w"}).expectError(401, "worker_token")
}

func TestRegisterHeartbeatAndWorkerListing(t *testing.T) {
	f := newFixture(t)
	f.worker("POST", "/worker/register", map[string]any{"tags": []string{"gpu"}}).expectError(400, "name")
	f.worker("POST", "/worker/register", `{"name": `).expectError(400, "malformed JSON")
	id := f.register("builder", "gpu", "linux")

	hb := f.worker("POST", "/worker/heartbeat", map[string]any{"worker_id": id}).expect(200).object()
	assertKeys(t, "heartbeat", hb, "status")
	if hb["status"] != "ok" {
		t.Fatalf("heartbeat = %v", hb)
	}
	f.worker("POST", "/worker/heartbeat", map[string]any{"worker_id": "00000000-0000-4000-8000-000000000000"}).expect(404).errorMessage()
	f.worker("POST", "/worker/heartbeat", map[string]any{}).expectError(400, "worker_id")

	list := f.api("GET", "/api/workers", nil).expect(200).object()
	assertKeys(t, "worker list", list, "items", "total")
	items := list["items"].([]any)
	if list["total"] != 1.0 || len(items) != 1 {
		t.Fatalf("workers = %v", list)
	}
	w := items[0].(map[string]any)
	assertKeys(t, "worker item", w, "id", "name", "tags", "status", "last_seen")
	if w["id"] != id || w["name"] != "builder" || w["status"] != "active" || !strings.HasSuffix(w["last_seen"].(string), "Z") {
		t.Fatalf("worker = %v", w)
	}
	if tags := w["tags"].([]any); len(tags) != 2 || tags[0] != "gpu" {
		t.Fatalf("tags = %v", tags)
	}
	f.api("GET", "/api/workers?limit=nope", nil).expectError(400, "limit")

	job := f.execute("x")
	f.runStep(id, job, "say", map[string]any{"greeting": "hi"})
	d := f.api("GET", "/api/workers/"+id, nil).expect(200).object()
	assertKeys(t, "worker detail", d, "id", "name", "tags", "status", "last_seen", "steps")
	steps := d["steps"].(map[string]any)
	assertKeys(t, "worker steps", steps, "items", "total")
	if steps["total"] != 1.0 {
		t.Fatalf("worker steps = %v", steps)
	}
	st := steps["items"].([]any)[0].(map[string]any)
	assertKeys(t, "worker step", st, "job_id", "workspace", "task_name", "job_status", "step_name", "action_type", "status", "started_at", "completed_at", "error_message")
	if st["job_id"] != job || st["step_name"] != "say" || st["status"] != "completed" || st["task_name"] != "hello" {
		t.Fatalf("worker step = %v", st)
	}
}

func TestClaimWithNoWorkReturnsTheNullBody(t *testing.T) {
	f := newFixture(t)
	id := f.register("idle")
	r := f.worker("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": id, "tags": []string{}}).expect(200)
	m := r.object()
	assertKeys(t, "no work", m, "job_id", "step_name", "action_spec")
	if m["job_id"] != nil || m["step_name"] != nil || m["action_spec"] != nil {
		t.Fatalf("no work = %s", r.body)
	}
	f.worker("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": "00000000-0000-4000-8000-000000000000"}).expect(404).errorMessage()
	f.worker("POST", "/worker/jobs/claim?wait=soon", map[string]any{"worker_id": id}).expectError(400, "wait")
	f.worker("POST", "/worker/jobs/claim", map[string]any{}).expectError(400, "worker_id")
}

func TestClaimLongPollAnswersWhenAStepBecomesReady(t *testing.T) {
	f := newFixture(t)
	w := f.register("waiter")
	got := make(chan map[string]any, 1)
	go func() {
		m := map[string]any{}
		r := f.worker("POST", "/worker/jobs/claim?wait=5", map[string]any{"worker_id": w, "tags": []string{}})
		if r.status == 200 {
			m = r.object()
		}
		got <- m
	}()
	id := f.execute("late")
	select {
	case m := <-got:
		if m["job_id"] != id || m["step_name"] != "say" {
			t.Fatalf("claim = %v, want say of %s", m, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting claim did not get the new step")
	}
}

func TestWorkerRunsAJobThroughTheProtocol(t *testing.T) {
	f := newFixture(t)
	w := f.register("runner")
	id := f.execute("World")

	a := f.claimStep(w, id, "say")
	assertKeys(t, "assignment", a, "job_id", "workspace", "revision", "step_name", "action_name", "action_type", "action_image", "runner", "action_spec", "input")
	if a["workspace"] != "main" || a["action_name"] != "greet" || a["action_type"] != "script" || a["runner"] != "local" || a["action_image"] != nil || a["revision"] == "" {
		t.Fatalf("assignment = %v", a)
	}
	spec := a["action_spec"].(map[string]any)
	if spec["type"] != "script" || !strings.Contains(spec["script"].(string), `hello "'World'"`) {
		t.Fatalf("action_spec = %v, want the script rendered, the value quoted", spec)
	}
	if in := a["input"].(map[string]any); in["name"] != "World" {
		t.Fatalf("input = %v", in)
	}

	start := f.worker("POST", "/worker/jobs/"+id+"/steps/say/start", map[string]any{"worker_id": w}).expect(200).object()
	if start["status"] != "ok" {
		t.Fatalf("start = %v", start)
	}
	if s := f.jobStatus(id); s != "running" {
		t.Fatalf("job status after start = %s, want running", s)
	}
	push := f.pushLogs(w, id, "say", "hello World")
	assertKeys(t, "log push", push, "status", "cancelled")
	if push["status"] != "ok" || push["cancelled"] != false {
		t.Fatalf("push = %v", push)
	}
	done := f.worker("POST", "/worker/jobs/"+id+"/steps/say/complete", map[string]any{
		"worker_id": w, "output": map[string]any{"greeting": "hi"}, "exit_code": 0, "error": nil,
	}).expect(200).object()
	if done["status"] != "ok" {
		t.Fatalf("complete = %v", done)
	}
	f.worker("POST", "/worker/jobs/"+id+"/steps/say/complete", map[string]any{
		"worker_id": w, "output": nil, "exit_code": 0, "error": nil,
	}).expect(409).errorMessage()

	f.runStep(w, id, "after", map[string]any{"ok": true})
	eventually(t, "job completed", func() bool { return f.jobStatus(id) == "completed" })
	job := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	out, _ := job["output"].(map[string]any)
	if after, _ := out["after"].(map[string]any); after["ok"] != true {
		t.Fatalf("job output = %v, want the sink step's output", job["output"])
	}
	if job["started_at"] == nil || job["completed_at"] == nil {
		t.Fatalf("job times = %v / %v", job["started_at"], job["completed_at"])
	}
	say := job["steps"].([]any)[0].(map[string]any)
	if say["status"] != "completed" || say["worker_id"] != w || say["output"].(map[string]any)["greeting"] != "hi" {
		t.Fatalf("say = %v", say)
	}
	f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(409).errorMessage()
}

// TestWorkersReportOnlyStepsTheyHold forges each report a worker makes
// (start, log push, complete) from another registered worker, from no
// worker and from an unknown one: each is refused and changes nothing.
// The holder's own reports go through, and once its step was recovered
// they are refused too.
func TestWorkersReportOnlyStepsTheyHold(t *testing.T) {
	f := newFixture(t, withHeartbeatTimeout(2*time.Second))
	holder := f.register("holder")
	intruder := f.register("intruder")
	id := f.execute("x")
	f.claimStep(holder, id, "say")
	const ghost = "00000000-0000-4000-8000-00000000dead"
	path := func(verb string) string { return "/worker/jobs/" + id + "/steps/say/" + verb }
	complete := func(worker string) map[string]any {
		return map[string]any{"worker_id": worker, "output": map[string]any{"forged": true}, "exit_code": 1, "error": "forged"}
	}
	forgers := []struct {
		name   string
		worker string
		status int
		want   string
	}{
		{"another worker", intruder, 409, "held by another worker"},
		{"no worker", "", 400, "worker_id is required"},
		{"an unknown worker", ghost, 404, ghost},
	}
	forge := func(t *testing.T) {
		for _, fg := range forgers {
			t.Run(fg.name, func(t *testing.T) {
				f := f.in(t)
				start := map[string]any{"worker_id": fg.worker}
				f.worker("POST", path("start"), start).expectError(fg.status, fg.want)
				f.worker("POST", "/worker/jobs/"+id+"/logs", logPush(fg.worker, "say", "forged line")).expectError(fg.status, fg.want)
				f.worker("POST", path("complete"), complete(fg.worker)).expectError(fg.status, fg.want)
			})
		}
	}
	say := func() map[string]any {
		return f.api("GET", "/api/jobs/"+id, nil).expect(200).object()["steps"].([]any)[0].(map[string]any)
	}
	sayLog := func() string {
		return f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string)
	}

	forge(t)
	// A claim is stored with the next commit (normally its start report's;
	// any other commit may carry it first): the step shows ready, or
	// running for its holder, and never started or changed by a forger.
	if s := say(); s["started_at"] != nil || s["output"] != nil ||
		!(s["status"] == "ready" && s["worker_id"] == nil || s["status"] == "running" && s["worker_id"] == holder) {
		t.Fatalf("after forged reports say = %v, want it unstarted: ready, or running for the holder %s", s, holder)
	}
	if l := sayLog(); l != "" {
		t.Fatalf("after forged pushes the log = %q, want empty", l)
	}

	// The holder's own reports go through; forgeries still fail while it runs.
	f.worker("POST", path("start"), map[string]any{"worker_id": holder}).expect(200)
	f.pushLogs(holder, id, "say", "real line")
	forge(t)
	if s := say(); s["status"] != "running" || s["started_at"] == nil {
		t.Fatalf("after start say = %v, want running and started", s)
	}
	if l := sayLog(); !strings.Contains(l, "real line") || strings.Contains(l, "forged") {
		t.Fatalf("log = %q, want the holder's line and no forged one", l)
	}

	// The holder goes quiet and its step is recovered (failed as lost): a
	// late report is refused and cannot overwrite the outcome.
	eventually(t, "the quiet worker's step recovered", func() bool { return say()["status"] == "failed" })
	before := say()
	f.worker("POST", path("start"), map[string]any{"worker_id": holder}).expectError(409, "failed")
	f.worker("POST", "/worker/jobs/"+id+"/logs", logPush(holder, "say", "late line")).expectError(409, "failed")
	f.worker("POST", path("complete"), map[string]any{"worker_id": holder, "output": map[string]any{}, "exit_code": 0, "error": nil}).expectError(409, "failed")
	if s := say(); s["status"] != "failed" || s["error_message"] != before["error_message"] || s["output"] != nil {
		t.Fatalf("after late reports say = %v, want it failed as recovered (%v)", s, before["error_message"])
	}
	if l := sayLog(); strings.Contains(l, "late line") {
		t.Fatalf("log = %q, want no late line", l)
	}
}

// TestClaimMatchesTheRegisteredTagsNotTheBody: a worker that registered
// without a tag cannot reach a step needing it by naming the tag in its
// claim; the worker that registered with it gets the step.
func TestClaimMatchesTheRegisteredTagsNotTheBody(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "main")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), `
tasks:
  train:
    flow:
      fit: {type: script, script: "true", tags: [gpu]}
`, 0o644)
	f := startAPI(t, tmp, map[string]string{"main": dir})
	plain := f.register("plain")
	id := f.api("POST", "/api/workspaces/main/tasks/train/execute", map[string]any{}).expect(200).object()["job_id"].(string)
	m := f.worker("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": plain, "tags": []string{"gpu"}}).expect(200).object()
	if m["job_id"] != nil {
		t.Fatalf("a worker registered without gpu claimed %v by naming gpu in its claim", m)
	}
	gpu := f.register("gpu-box", "gpu")
	f.claimStep(gpu, id, "fit") // its claim body (the fixture's) names no tags at all
}

func TestLogPushValidatesAndReportsCancellation(t *testing.T) {
	f := newFixture(t)
	w := f.register("w")
	id := f.execute("x")
	f.claimStep(w, id, "say")
	push := "/worker/jobs/" + id + "/logs"
	tests := []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"missing step", map[string]any{"worker_id": w, "lines": []any{}}, 400, "step_name"},
		{"bad stream", map[string]any{"worker_id": w, "step_name": "say", "lines": []any{map[string]any{"stream": "stdin", "line": "x"}}}, 400, "stream"},
		{"unknown step", map[string]any{"worker_id": w, "step_name": "nope", "lines": []any{}}, 404, `step "nope"`},
		{"server step is not the worker's", map[string]any{"worker_id": w, "step_name": "_server", "lines": []any{}}, 404, "_server"},
		{"malformed", `{"step_name":`, 400, "malformed JSON"},
		// encoding/json words the refusals of the bodies the hand-coded
		// decoder declines.
		{"seq not a number", []byte(`{"worker_id":"` + w + `","step_name":"say","lines":[{"seq":"1","stream":"stdout","line":"x"}]}`), 400, "field lines.seq: expected a number, got JSON string"},
		{"ts not RFC 3339", []byte(`{"worker_id":"` + w + `","step_name":"say","lines":[{"ts":"yesterday","stream":"stdout","line":"x"}]}`), 400, "malformed JSON body"},
		{"two values", []byte(`{"worker_id":"` + w + `","step_name":"say"} {}`), 400, "unexpected data after the value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.in(t).worker("POST", push, tt.body).expectError(tt.status, tt.want)
		})
	}
	f.worker("POST", "/worker/jobs/00000000-0000-4000-8000-000000000000/logs", map[string]any{"worker_id": w, "step_name": "say"}).expect(404)

	// A line without ts gets the arrival time (the fixture's clock).
	f.worker("POST", push, map[string]any{"worker_id": w, "step_name": "say", "lines": []any{map[string]any{"stream": "stderr", "line": "no ts"}}}).expect(200)
	logs := f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string)
	if !strings.Contains(logs, `"ts":"2025-03-29T12:00:00Z"`) || !strings.Contains(logs, `"stream":"stderr"`) {
		t.Fatalf("logs = %q", logs)
	}

	cancelled := f.worker("GET", "/worker/jobs/"+id+"/cancelled?wait=0", nil).expect(200).object()
	assertKeys(t, "cancelled", cancelled, "cancelled")
	if cancelled["cancelled"] != false {
		t.Fatalf("cancelled before cancel = %v", cancelled)
	}
	f.api("POST", "/api/jobs/"+id+"/cancel", nil).expect(200)
	if m := f.worker("GET", "/worker/jobs/"+id+"/cancelled?wait=5", nil).expect(200).object(); m["cancelled"] != true {
		t.Fatalf("cancelled after cancel = %v", m)
	}
	// The cancel ended the step, but the killed processes' last lines
	// still come from the worker that held it: they are kept; another
	// worker's are refused.
	f.worker("POST", push, logPush(w, "say", "after cancel")).expect(200)
	other := f.register("other")
	f.worker("POST", push, logPush(other, "say", "forged after cancel")).expectError(409, "cancelled")
	if logs := f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string); !strings.Contains(logs, "after cancel") || strings.Contains(logs, "forged") {
		t.Fatalf("logs after cancel = %q, want the holder's last line only", logs)
	}
	f.worker("GET", "/worker/jobs/"+id+"/cancelled?wait=-1", nil).expectError(400, "wait")
}

// A pushed line's escapes are undone on the way in, and the log gives the
// text back as it was printed, whoever wrote the push's JSON.
func TestPushedLineReachesTheLogAsPrinted(t *testing.T) {
	f := newFixture(t)
	w := f.register("w")
	id := f.execute("x")
	f.claimStep(w, id, "say")
	body := `{"worker_id":"` + w + `","step_name":"say","run":"r1","lines":[` +
		`{"seq":1,"ts":"2025-03-29T12:00:01.5+01:00","stream":"stdout","line":"tab\t\"q\" \u00e9\/ \ud83c\udf89 <&>"},` +
		`{"seq":2,"ts":"2025-03-29T12:00:02Z","stream":"stderr","line":"raw é 🎉 \u2028"}]}`
	f.worker("POST", "/worker/jobs/"+id+"/logs", []byte(body)).expect(200)
	logs := f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string)
	var got []map[string]string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var line map[string]string
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		got = append(got, line)
	}
	want := []map[string]string{
		{"ts": "2025-03-29T11:00:01.5Z", "stream": "stdout", "step": "say", "line": "tab\t\"q\" é/ 🎉 <&>"},
		{"ts": "2025-03-29T12:00:02Z", "stream": "stderr", "step": "say", "line": "raw é 🎉 \u2028"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("log lines = %q, want %q", got, want)
	}
}

// A worker repeats a push whose answer it lost; numbered lines the log
// already has are not written again, and a new run of the step starts its
// numbering afresh.
func TestRepeatedNumberedLogPushIsAppendedOnce(t *testing.T) {
	f := newFixture(t)
	w := f.register("w")
	id := f.execute("x")
	f.claimStep(w, id, "say")
	push := "/worker/jobs/" + id + "/logs"
	lines := func(from, to int) []any {
		var out []any
		for i := from; i <= to; i++ {
			out = append(out, map[string]any{"seq": i, "stream": "stdout", "line": fmt.Sprintf("line %d", i)})
		}
		return out
	}
	for _, body := range []map[string]any{
		{"worker_id": w, "step_name": "say", "run": "r1", "lines": lines(1, 3)},
		{"worker_id": w, "step_name": "say", "run": "r1", "lines": lines(1, 3)}, // the answer was lost
		{"worker_id": w, "step_name": "say", "run": "r1", "lines": lines(2, 5)}, // a bigger batch overlapping it
		{"worker_id": w, "step_name": "say", "run": "r2", "lines": lines(1, 1)}, // the step's next run
		{"worker_id": w, "step_name": "say", "lines": lines(1, 1)},              // unnumbered: always appended
	} {
		f.worker("POST", push, body).expect(200)
	}
	logs := f.api("GET", "/api/jobs/"+id+"/steps/say/logs", nil).expect(200).object()["logs"].(string)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var line struct {
			Line string `json:"line"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		got = append(got, line.Line)
	}
	want := "line 1,line 2,line 3,line 4,line 5,line 1,line 1"
	if strings.Join(got, ",") != want {
		t.Fatalf("log lines %v, want %s", got, want)
	}
}
