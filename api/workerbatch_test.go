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

// TestClaimCarriesResults: a claim of several may carry the worker's
// results; each is answered as its own complete would be (a bad one
// alone refused), and the claim then takes what is ready without waiting.
func TestClaimCarriesResults(t *testing.T) {
	f := newFixture(t)
	id := f.register("carrier")
	other := f.register("other")
	first := f.execute("a")
	ans := f.worker("POST", "/worker/claims?wait=5", map[string]any{"worker_id": id, "max": 1}).expect(200).object()
	if as := ans["assignments"].([]any); len(as) != 1 || as[0].(map[string]any)["job_id"] != first {
		t.Fatalf("claimed %v, want the step of %s", as, first)
	}
	second := f.execute("b")
	// Its input renders off the loop: ready a moment after the execute.
	eventually(t, "the second job's step to be ready", func() bool {
		d := f.api("GET", "/api/jobs/"+second, nil).expect(200).object()
		return d["steps"].([]any)[0].(map[string]any)["status"] == "ready"
	})
	result := func(job, step, worker string) map[string]any {
		return map[string]any{"job_id": job, "step_name": step, "worker_id": worker, "output": map[string]any{"n": 1}, "exit_code": 0, "error": nil}
	}
	carrying := map[string]any{"worker_id": id, "max": 5, "results": []any{
		result(first, "say", id),
		result(first, "nope", id),
		result(first, "", id),
		result(first, "say", other),
	}}
	ans = f.worker("POST", "/worker/claims?wait=5", carrying).expect(200).object()
	assertKeys(t, "a claim carrying results", ans, "assignments", "results")
	var got []float64
	for _, a := range ans["results"].([]any) {
		got = append(got, a.(map[string]any)["status"].(float64))
	}
	if len(got) != 4 || got[0] != 200 || got[1] != 404 || got[2] != 400 || got[3] != 400 {
		t.Fatalf("result statuses %v, want [200 404 400 400]", got)
	}
	// The ready step of the second job, and the step the first job's
	// result made ready, in the same commit.
	as := ans["assignments"].([]any)
	if len(as) != 2 || as[0].(map[string]any)["job_id"] != second || as[1].(map[string]any)["job_id"] != first || as[1].(map[string]any)["step_name"] != "after" {
		t.Fatalf("claimed %v, want %s/say then %s/after", as, second, first)
	}
	// The same result again (its answer lost) is refused, not recorded
	// twice; with nothing ready the claim answers at once, with no step.
	ans = f.worker("POST", "/worker/claims?wait=30", map[string]any{"worker_id": id, "max": 5, "results": []any{result(first, "say", id)}}).expect(200).object()
	if rs, as := ans["results"].([]any), ans["assignments"].([]any); len(rs) != 1 || rs[0].(map[string]any)["status"].(float64) != 409 || len(as) != 0 {
		t.Fatalf("the result again: %v; want it refused (409), nothing claimed", ans)
	}
	f.worker("POST", "/worker/claims", map[string]any{"worker_id": id, "results": make([]any, 65)}).expectError(400, "results")
	secret, _ := f.secrets.Load(id)
	header := map[string]string{"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: secret.(string)}
	for _, a := range as {
		a := a.(map[string]any)
		r := f.do("POST", "/worker/reports", map[string]any{"results": []any{result(a["job_id"].(string), a["step_name"].(string), id)}}, header).expect(200).object()
		if st := r["results"].([]any)[0].(map[string]any)["status"]; st != 200.0 {
			t.Fatalf("report of %v: %v", a["step_name"], r)
		}
	}
	if d := f.api("GET", "/api/jobs/"+first, nil).expect(200).object(); d["status"] != "completed" {
		t.Fatalf("job %s is %v once both its steps reported, want completed", first, d["status"])
	}
}
