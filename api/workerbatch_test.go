package api_test

import (
	"testing"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// TestClaimOfSeveralStartsTheStepsAndReportsAreAnsweredOneByOne: POST
// /worker/claims hands the worker up to max ready steps, started; POST
// /worker/reports takes several results and answers each as its own
// complete would, so a batch sent again applies nothing twice.
func TestClaimOfSeveralStartsTheStepsAndReportsAreAnsweredOneByOne(t *testing.T) {
	f := newFixture(t)
	id := f.register("batcher")
	jobs := map[string]bool{f.execute("a"): true, f.execute("b"): true}

	f.worker("POST", "/worker/claims", map[string]any{"worker_id": id, "max": 65}).expectError(400, "max")
	ans := f.worker("POST", "/worker/claims?wait=5", map[string]any{"worker_id": id, "max": 5}).expect(200).object()
	assertKeys(t, "claims", ans, "assignments")
	as := ans["assignments"].([]any)
	if len(as) != 2 {
		t.Fatalf("claimed %d steps, want the 2 ready: %v", len(as), as)
	}
	for _, a := range as {
		job := a.(map[string]any)["job_id"].(string)
		if !jobs[job] {
			t.Fatalf("claimed a step of job %s, not one of %v", job, jobs)
		}
		d := f.api("GET", "/api/jobs/"+job, nil).expect(200).object()
		st := d["steps"].([]any)[0].(map[string]any)
		if d["status"] != "running" || st["status"] != "running" || st["started_at"] == nil || st["worker_id"] != id {
			t.Fatalf("job %s after the claim: %v", job, d)
		}
	}
	if again := f.worker("POST", "/worker/claims?wait=0", map[string]any{"worker_id": id, "max": 5}).expect(200).object(); len(again["assignments"].([]any)) != 0 {
		t.Fatalf("a claim with nothing ready got %v", again)
	}

	secret, _ := f.secrets.Load(id)
	header := map[string]string{"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: secret.(string)}
	first := as[0].(map[string]any)["job_id"].(string)
	second := as[1].(map[string]any)["job_id"].(string)
	result := func(job, step string) map[string]any {
		return map[string]any{"job_id": job, "step_name": step, "worker_id": id, "output": map[string]any{"n": 1}, "exit_code": 0, "error": nil}
	}
	batch := map[string]any{"results": []any{result(first, "say"), result(second, "nope")}}
	statuses := func(r response) []float64 {
		t.Helper()
		var out []float64
		for _, a := range r.expect(200).object()["results"].([]any) {
			out = append(out, a.(map[string]any)["status"].(float64))
		}
		return out
	}
	if got := statuses(f.do("POST", "/worker/reports", batch, header)); len(got) != 2 || got[0] != 200 || got[1] != 404 {
		t.Fatalf("statuses %v, want [200 404]", got)
	}
	// Sent again (its answer lost): the step already completed is refused,
	// not recorded twice.
	if got := statuses(f.do("POST", "/worker/reports", batch, header)); len(got) != 2 || got[0] != 409 || got[1] != 404 {
		t.Fatalf("statuses of the batch sent again %v, want [409 404]", got)
	}
	// Without the worker's secret each report is refused as its own would be.
	noSecret := map[string]string{"Authorization": "Bearer " + workerToken}
	if got := statuses(f.do("POST", "/worker/reports", map[string]any{"results": []any{result(second, "say")}}, noSecret)); len(got) != 1 || got[0] != 403 {
		t.Fatalf("statuses without the secret %v, want [403]", got)
	}
	if got := statuses(f.do("POST", "/worker/reports", map[string]any{"results": []any{result(second, "say")}}, header)); len(got) != 1 || got[0] != 200 {
		t.Fatalf("statuses %v, want [200]", got)
	}
	f.do("POST", "/worker/reports", map[string]any{"results": []any{}}, header).expectError(400, "results")
	for job := range jobs {
		d := f.api("GET", "/api/jobs/"+job, nil).expect(200).object()
		if st := d["steps"].([]any)[0].(map[string]any); st["step_name"] != "say" || st["status"] != "completed" {
			t.Fatalf("job %s: step %v, want say completed", job, st)
		}
	}
}
