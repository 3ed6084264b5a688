package api_test

import (
	"testing"
)

// failedHelloJob runs hello's say step and fails its after step.
func failedHelloJob(f *fixture, worker string) string {
	f.t.Helper()
	id := f.execute("World")
	f.runStep(worker, id, "say", map[string]any{"said": "hello World"})
	f.endStep(worker, id, "after", nil, 3, nil)
	return id
}

func stepsByName(job map[string]any) map[string]map[string]any {
	m := map[string]map[string]any{}
	steps, _ := job["steps"].([]any)
	for _, s := range steps {
		st := s.(map[string]any)
		m[st["step_name"].(string)] = st
	}
	return m
}

func TestRerunFromFailedStepsReusesCompletedOnesOverTheAPI(t *testing.T) {
	f := newFixture(t)
	w := f.register("w1")
	old := failedHelloJob(f, w)
	eventually(t, "the job to fail", func() bool { return f.jobStatus(old) == "failed" })

	id, _ := f.api("POST", "/api/jobs/"+old+"/rerun", map[string]any{"from_failed": true}).expect(200).object()["job_id"].(string)
	if id == "" || id == old {
		t.Fatalf("rerun answered job_id %q", id)
	}
	var job map[string]any
	eventually(t, "after to be ready in the re-run", func() bool {
		job = f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
		return stepsByName(job)["after"]["status"] == "ready"
	})
	if job["rerun_of"] != old || job["task_name"] != "hello" || job["source_type"] != "api" {
		t.Fatalf("re-run job = %v, want rerun_of %s", job, old)
	}
	if in := job["input"].(map[string]any); in["name"] != "World" {
		t.Fatalf("re-run input = %v, want the old one", in)
	}
	say := stepsByName(job)["say"]
	if say["status"] != "completed" || say["reused_from"] != old || say["worker_id"] != nil ||
		say["output"].(map[string]any)["said"] != "hello World" {
		t.Fatalf("say = %v, want completed, reused from %s with its output", say, old)
	}
	if _, ok := stepsByName(job)["after"]["reused_from"]; ok {
		t.Fatalf("after was not reused: %v", stepsByName(job)["after"])
	}
	items := f.api("GET", "/api/jobs", nil).expect(200).object()["items"].([]any)
	if first := items[0].(map[string]any); first["job_id"] != id || first["rerun_of"] != old {
		t.Fatalf("newest list item = %v, want the re-run with rerun_of", first)
	}

	// Only after runs; the job completes with the reused output.
	f.runStep(w, id, "after", nil)
	eventually(t, "the re-run to complete", func() bool { return f.jobStatus(id) == "completed" })
}

func TestRerunAnswers(t *testing.T) {
	f := newFixture(t)
	w := f.register("w1")
	done := f.execute("World")
	f.runStep(w, done, "say", nil)
	f.runStep(w, done, "after", nil)
	eventually(t, "the job to complete", func() bool { return f.jobStatus(done) == "completed" })

	t.Run("whole re-run of a completed job", func(t *testing.T) {
		id := f.in(t).api("POST", "/api/jobs/"+done+"/rerun", nil).expect(200).object()["job_id"].(string)
		job := f.in(t).api("GET", "/api/jobs/"+id, nil).expect(200).object()
		if job["rerun_of"] != done || job["input"].(map[string]any)["name"] != "World" {
			t.Fatalf("re-run = %v", job)
		}
	})
	t.Run("given input replaces the old", func(t *testing.T) {
		id := f.in(t).api("POST", "/api/jobs/"+done+"/rerun", map[string]any{"input": map[string]any{"name": "Ann"}}).expect(200).object()["job_id"].(string)
		if in := f.in(t).api("GET", "/api/jobs/"+id, nil).expect(200).object()["input"].(map[string]any); in["name"] != "Ann" || in["times"] != 1.0 {
			t.Fatalf("input = %v, want the given one with defaults", in)
		}
	})
	errs := []struct {
		name, path string
		body       any
		status     int
		want       string
	}{
		{"from_failed on a completed job", done, map[string]any{"from_failed": true}, 409, "only a failed or cancelled job"},
		{"unknown input key", done, map[string]any{"input": map[string]any{"name": "x", "nmae": "y"}}, 400, "nmae"},
		{"missing required input", done, map[string]any{"input": map[string]any{}}, 400, "name"},
		{"unknown job", "0190a0a0-0000-7000-8000-000000000000", nil, 404, "not found"},
		{"malformed job id", "nope", nil, 404, "nope"},
		{"malformed body", done, `{"from_failed": "yes"}`, 400, "from_failed"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			f.in(t).api("POST", "/api/jobs/"+tc.path+"/rerun", tc.body).expectError(tc.status, tc.want)
		})
	}
}

func TestRerunNeedsAuthAndRecordsTheUser(t *testing.T) {
	f := newAuthFixture(t, nil)
	f.addUser("ada@example.com", "correct horse battery", false)
	access, _ := f.login("ada@example.com", "correct horse battery")
	old := f.as(access, "POST", "/api/workspaces/main/tasks/hello/execute", map[string]any{"input": map[string]any{"name": "x"}}).expect(200).object()["job_id"].(string)

	f.api("POST", "/api/jobs/"+old+"/rerun", nil).expectError(401, "bearer token")
	id := f.as(access, "POST", "/api/jobs/"+old+"/rerun", nil).expect(200).object()["job_id"].(string)
	job := f.as(access, "GET", "/api/jobs/"+id, nil).expect(200).object()
	if job["source_type"] != "user" || job["source_id"] != "ada@example.com" || job["rerun_of"] != old {
		t.Fatalf("re-run = %v, want source user ada@example.com", job)
	}
}
