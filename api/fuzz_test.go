package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// fuzzWorkflow has an input of every type (and a connection) for execute,
// and a DAG whose later steps template what earlier ones report, so fuzzed
// input and step output reach the engine's `when`, `for_each` and input
// rendering. No template multiplies by or loops over a fuzzed number:
// render time limits are another test's business.
const fuzzWorkflow = `
connection_types:
  endpoint:
    url: {type: string, required: true}
    token: {type: string}
connections:
  staging: {type: endpoint, url: https://staging.example.com, token: t0k}
tasks:
  inputs:
    input:
      name: {type: string, required: true}
      notes: {type: text}
      count: {type: integer, default: 1}
      ratio: {type: number}
      on: {type: boolean, default: false}
      day: {type: date}
      at: {type: datetime}
      env: {type: string, options: [dev, prod], default: dev}
      channel: {type: string, options: [stable, beta], allow_custom: true}
      target: {type: endpoint, default: staging}
    flow:
      show:
        type: script
        script: echo "{{ input.name }} {{ input.count }} {{ input.target.url }} {{ input.extra | default('') }}"
      maybe:
        when: "{{ input.on and input.count > 2 }}"
        type: script
        script: echo "{{ input | tojson }}"
  flow:
    flow:
      first:
        type: script
        script: echo first
        output:
          items: {type: array}
      fan:
        depends_on: [first]
        for_each: "{{ first.output.items | default([]) }}"
        type: script
        input:
          item: "{{ each.item }}"
        script: echo "{{ input.item }}"
      after:
        depends_on: [first]
        when: "{{ first.output.ok | default(false) }}"
        type: script
        script: echo "{{ first.output | tojson }} {{ first.output.name | default('') | upper }}"
`

// fuzzAPI is a real server over fuzzWorkflow, built once per fuzz target.
func fuzzAPI(f *testing.F) *fixture {
	tmp := f.TempDir()
	dir := filepath.Join(tmp, "fuzz")
	writeFile(f, filepath.Join(dir, ".workflows", "main.yaml"), fuzzWorkflow, 0o644)
	fx := startAPI(f, tmp, map[string]string{"fuzz": dir})
	// A workflow that fails to load would leave every input a 404.
	fx.api("GET", "/api/workspaces/fuzz/tasks/inputs", nil).expect(200)
	fx.api("GET", "/api/workspaces/fuzz/tasks/flow", nil).expect(200)
	return fx
}

// expectHandled fails on a 5xx (bad input is the client's error) and on an
// error that is not the {"error": "..."} body.
func (r response) expectHandled(what string) {
	r.t.Helper()
	if r.status >= 500 {
		r.t.Fatalf("%s: status %d: %s", what, r.status, r.body)
	}
	if r.status >= 400 {
		r.errorMessage()
	}
}

// watchdog crashes the fuzz worker when one input takes longer than d: the
// fuzzer has no per-input timeout, and a crash keeps the input.
func watchdog(d time.Duration, what string, input []byte) func() bool {
	return time.AfterFunc(d, func() { panic(fmt.Sprintf("%s %q: no answer after %s", what, input, d)) }).Stop
}

// FuzzExecute posts arbitrary bodies to the execute endpoint: the body is
// decoded and its input resolved against every input type; a job may be
// created, and its first steps evaluated with that input. Any answer but a
// 5xx or a panic will do.
func FuzzExecute(f *testing.F) {
	for _, s := range []string{
		`{"input": {"name": "x"}}`,
		`{"input": {"name": "x", "count": "7", "ratio": 1e308, "on": "true", "day": "2025-03-30", "at": "2025-03-30T02:30", "env": "prod", "channel": "nightly", "target": "staging", "extra": [1, {"a": null}]}}`,
		`{"input": {"name": "x", "count": 9007199254740993}}`,
		`{"input": {"name": "x", "count": 1.5, "ratio": "NaN", "at": "2025-13-01T00:00Z"}}`,
		`{"input": {"name": "x", "target": {"name": "staging", "url": "http://evil"}}}`,
		`{"input": {"name": "x", "on": true, "count": 3}}`,
		`{"input": {"name": {"nested": ["x"]}, "env": "", "day": 20250330}}`,
		`{"input": null}`, `{"input": []}`, `[]`, `null`, `"x"`, ``, `{`, `{"input": {}} {}`,
		`{"input": {"name": "\u0000{{ secret.X }}"}, "unknown": 1}`,
	} {
		f.Add([]byte(s))
	}
	fx := fuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		defer watchdog(10*time.Second, "execute", body)()
		r := fx.in(t).api("POST", "/api/workspaces/fuzz/tasks/inputs/execute", body)
		r.expectHandled("execute")
		if r.status == 200 {
			if id, _ := r.object()["job_id"].(string); id == "" {
				t.Fatalf("execute answered 200 without a job_id: %s", r.body)
			}
		}
	})
}

// workerOps are the worker reports FuzzWorkerReports sends its body to.
var workerOps = []string{"register", "heartbeat", "claim", "start", "complete", "logs"}

// FuzzWorkerReports sends an arbitrary body to one worker endpoint. Each
// input gets a fresh worker and job ("$WORKER", "$JOB" and "$STEP" in the
// body become their ids), and the job's first step is claimed and started
// before a complete, so a fuzzed step output reaches the steps that
// template it. The job is cancelled afterwards, leaving nothing ready for
// the next input.
func FuzzWorkerReports(f *testing.F) {
	for _, s := range []struct {
		op   uint8
		body string
	}{
		{0, `{"name": "w", "tags": ["gpu", ""]}`},
		{0, `{"name": " ", "tags": null}`},
		{0, `{"name": "w", "tags": [], "want_secret": true}`},
		{1, `{"worker_id": "$WORKER", "running": [{"job_id": "$JOB", "step_name": "first"}]}`},
		{1, `{"worker_id": "$WORKER", "running": [{"job_id": "nope", "step_name": ""}]}`},
		{2, `{"worker_id": "$WORKER", "tags": []}`},
		{2, `{"worker_id": "00000000-0000-4000-8000-000000000000"}`},
		{3, `{"worker_id": "$WORKER"}`},
		{4, `{"worker_id": "$WORKER", "output": {"items": [1, "two", {"k": null}], "ok": true, "name": "n"}, "exit_code": 0, "error": null}`},
		{4, `{"worker_id": "$WORKER", "output": {"items": "{{ secret.X }}"}, "exit_code": 1, "error": "boom"}`},
		{4, `{"worker_id": "$WORKER", "output": null, "exit_code": -9223372036854775808}`},
		{4, `{"worker_id": "$WORKER", "output": {"items": [[[[[]]]]], "ok": "yes"}}`},
		{5, `{"step_name": "$STEP", "lines": [{"ts": "2025-03-29T12:00:00Z", "stream": "stdout", "line": "hi"}]}`},
		{5, `{"step_name": "$STEP", "lines": [{"ts": "yesterday", "stream": "stdin", "line": ""}]}`},
		{5, `{"step_name": "_server", "lines": []}`},
	} {
		f.Add(s.op, []byte(s.body))
	}
	fx := fuzzAPI(f)
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		defer watchdog(20*time.Second, workerOps[int(op)%len(workerOps)], body)()
		w := fx.in(t)
		worker := w.register("fuzz")
		job := w.api("POST", "/api/workspaces/fuzz/tasks/flow/execute", map[string]any{}).expect(200).object()["job_id"].(string)
		defer func() { w.api("POST", "/api/jobs/"+job+"/cancel", nil).expectHandled("cancel") }()

		name := workerOps[int(op)%len(workerOps)]
		if name == "start" || name == "complete" || name == "logs" {
			w.claimStep(worker, job, "first")
		}
		if name == "complete" {
			w.worker("POST", "/worker/jobs/"+job+"/steps/first/start", map[string]any{"worker_id": worker}).expect(200)
		}
		body = bytes.ReplaceAll(body, []byte("$WORKER"), []byte(worker))
		body = bytes.ReplaceAll(body, []byte("$JOB"), []byte(job))
		body = bytes.ReplaceAll(body, []byte("$STEP"), []byte("first"))
		path := map[string]string{
			"register":  "/worker/register",
			"heartbeat": "/worker/heartbeat",
			"claim":     "/worker/jobs/claim?wait=0",
			"start":     "/worker/jobs/" + job + "/steps/first/start",
			"complete":  "/worker/jobs/" + job + "/steps/first/complete",
			"logs":      "/worker/jobs/" + job + "/logs",
		}[name]
		w.worker("POST", path, body).expectHandled(name)
		// The engine evaluates what the report unblocked in its loop; the
		// job's record must still read back.
		var j map[string]any
		if err := json.Unmarshal(w.api("GET", "/api/jobs/"+job, nil).expect(200).body, &j); err != nil {
			t.Fatalf("job %s: %v", job, err)
		}
	})
}
