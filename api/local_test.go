package api_test

import (
	"testing"
)

// localJob creates a local job of task hello held by worker w.
func (f *fixture) localJob(w string) string {
	f.t.Helper()
	m := f.worker("POST", "/worker/jobs", map[string]any{"worker_id": w, "workspace": "main", "task": "hello",
		"input": map[string]any{"name": "local"}}).expect(200).object()
	id, _ := m["job_id"].(string)
	if id == "" {
		f.t.Fatalf("create local job: %v", m)
	}
	return id
}

func (f *fixture) claimLocal(w, jobID, wait string) map[string]any {
	f.t.Helper()
	m := f.worker("POST", "/worker/jobs/claim?wait="+wait, map[string]any{"worker_id": w, "job_id": jobID}).expect(200).object()
	if m["job_id"] == nil {
		return nil
	}
	return m
}

func TestLocalJobsStepsGoOnlyToItsHolder(t *testing.T) {
	f := newFixture(t)
	holder, other := f.register("holder"), f.register("other")
	id := f.localJob(holder)
	if j := f.api("GET", "/api/jobs/"+id, nil).expect(200).object(); j["source_type"] != "local" || j["source_id"] != holder {
		t.Fatalf("local job: source %v %v, want local %s", j["source_type"], j["source_id"], holder)
	}
	// Another worker's plain claim never sees the job's steps, nor may it
	// claim them by the job.
	if m := f.claim(other, "0"); m != nil {
		t.Fatalf("another worker claimed a local job's step: %v", m)
	}
	f.worker("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": other, "job_id": id}).expectError(409, "held by worker")

	for _, step := range []string{"say", "after"} {
		m := f.claimLocal(holder, id, "5")
		if m == nil || m["step_name"] != step {
			t.Fatalf("local claim: %v, want step %s", m, step)
		}
		if m := f.claim(other, "0"); m != nil {
			t.Fatalf("another worker claimed a local job's step: %v", m)
		}
		f.worker("POST", "/worker/jobs/"+id+"/steps/"+step+"/start", map[string]any{"worker_id": holder}).expect(200)
		f.worker("POST", "/worker/jobs/"+id+"/steps/"+step+"/complete", map[string]any{
			"worker_id": holder, "output": map[string]any{"step": step}, "exit_code": 0, "error": nil}).expect(200)
	}
	// The job ended with its last step; its claims say so.
	f.worker("POST", "/worker/jobs/claim?wait=1", map[string]any{"worker_id": holder, "job_id": id}).expectError(409, "completed")
	m := f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"worker_id": holder, "output": map[string]any{}}).expect(200).object()
	if m["job_status"] != "completed" {
		t.Fatalf("complete: %v", m)
	}
	j := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	if out, _ := j["output"].(map[string]any); out["after"] == nil {
		t.Fatalf("job output %v, want the sink step's", j["output"])
	}
}

func TestCompleteJobRefusesWhatIsNotItsHoldersLocalJob(t *testing.T) {
	f := newFixture(t)
	holder, other := f.register("holder"), f.register("other")
	id := f.localJob(holder)
	plain := f.execute("x")
	f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"output": map[string]any{}}).expectError(400, "worker_id is required")
	f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"worker_id": holder, "output": "done"}).expectError(400, "output")
	f.worker("POST", "/worker/jobs/0190b1f4-0000-7000-8000-000000000000/complete", map[string]any{"worker_id": holder}).expectError(404, "not found")
	f.worker("POST", "/worker/jobs/"+plain+"/complete", map[string]any{"worker_id": holder}).expectError(409, "not a local job")
	f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"worker_id": other}).expectError(409, "held by worker")
	f.worker("POST", "/worker/jobs", map[string]any{"worker_id": "nobody", "workspace": "main", "task": "hello", "input": map[string]any{"name": "n"}}).expectError(404, "worker nobody")
	f.worker("POST", "/worker/jobs", map[string]any{"worker_id": holder, "workspace": "main", "task": "nope"}).expectError(404, "nope")
	f.worker("POST", "/worker/jobs", map[string]any{"worker_id": holder, "workspace": "main"}).expectError(400, "task is required")

	// Completing a job with steps not run ends it: they are cancelled and
	// the job fails.
	m := f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"worker_id": holder}).expect(200).object()
	if m["job_status"] != "failed" {
		t.Fatalf("complete with steps left: %v", m)
	}
	j := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	for _, s := range j["steps"].([]any) {
		if st := s.(map[string]any)["status"]; st != "cancelled" {
			t.Fatalf("step left by the worker is %v, want cancelled", st)
		}
	}
	// Said twice, it is the same answer.
	if m := f.worker("POST", "/worker/jobs/"+id+"/complete", map[string]any{"worker_id": holder}).expect(200).object(); m["job_status"] != "failed" {
		t.Fatalf("second complete: %v", m)
	}
}
