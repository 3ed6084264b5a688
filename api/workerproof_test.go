package api_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// TestWorkersProveWhoTheyAre is the attack of a holder of the worker
// token naming another worker's id: without that worker's secret (none,
// or another worker's) its claim, start, log push, complete and heartbeat
// are refused with 403 and change nothing; the worker's own reports, with
// its secret, go through, and the job ends with its output, not the
// forger's.
func TestWorkersProveWhoTheyAre(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "main")
	writeFile(t, filepath.Join(dir, ".workflows", "main.yaml"), `
tasks:
  train:
    flow:
      fit: {type: script, script: "echo fit", tags: [gpu]}
`, 0o644)
	f := startAPI(t, tmp, map[string]string{"main": dir})
	victim := f.register("gpu-box", "gpu")
	forger := f.register("forger")
	id := f.api("POST", "/api/workspaces/main/tasks/train/execute", map[string]any{}).expect(200).object()["job_id"].(string)

	// The forger has the worker token and the victim's id (GET /api/workers
	// shows it to every user), and its own secret or none.
	as := map[string]map[string]string{
		"no secret":             {"Authorization": "Bearer " + workerToken},
		"another worker's":      {"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: f.secret(forger)},
		"a made-up secret":      {"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: strings.Repeat("A", 43)},
		"an empty secret field": {"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: ""},
	}
	step := "/worker/jobs/" + id + "/steps/fit/"
	type report func(f *fixture, header map[string]string) response
	forge := func(t *testing.T, reports map[string]report) {
		for how, header := range as {
			for name, report := range reports {
				t.Run(how+"/"+name, func(t *testing.T) {
					report(f.in(t), header).expectError(403, victim)
				})
			}
		}
	}

	// The claim: the victim's gpu step is not handed to the forger.
	forge(t, map[string]report{
		"claim": func(f *fixture, h map[string]string) response {
			return f.do("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": victim, "tags": []string{}}, h)
		},
		"heartbeat": func(f *fixture, h map[string]string) response {
			return f.do("POST", "/worker/heartbeat", map[string]any{"worker_id": victim}, h)
		},
	})
	f.claimStep(victim, id, "fit")

	// Its step's reports, before and after the victim started it.
	reports := map[string]report{
		"log push": func(f *fixture, h map[string]string) response {
			return f.do("POST", "/worker/jobs/"+id+"/logs", logPush(victim, "fit", "forged line"), h)
		},
		"complete": func(f *fixture, h map[string]string) response {
			return f.do("POST", step+"complete", map[string]any{"worker_id": victim, "output": map[string]any{"forged": true}, "exit_code": 0, "error": nil}, h)
		},
		"heartbeat": func(f *fixture, h map[string]string) response {
			return f.do("POST", "/worker/heartbeat", map[string]any{"worker_id": victim, "running": []any{}}, h)
		},
		"workspace token": func(f *fixture, h map[string]string) response {
			return f.do("POST", step+"workspace-token", map[string]any{"worker_id": victim}, h)
		},
	}
	reports["start"] = func(f *fixture, h map[string]string) response {
		return f.do("POST", step+"start", map[string]any{"worker_id": victim}, h)
	}
	forge(t, reports)
	delete(reports, "start")
	f.worker("POST", step+"start", map[string]any{"worker_id": victim}).expect(200)
	forge(t, reports)

	f.pushLogs(victim, id, "fit", "real line")
	f.worker("POST", step+"complete", map[string]any{"worker_id": victim, "output": map[string]any{"real": true}, "exit_code": 0, "error": nil}).expect(200)
	eventually(t, "job completed", func() bool { return f.jobStatus(id) == "completed" })
	job := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()
	if fit, _ := job["output"].(map[string]any)["fit"].(map[string]any); fit["real"] != true || fit["forged"] != nil {
		t.Fatalf("job output = %v, want the victim's {real: true}", job["output"])
	}
	log := f.api("GET", "/api/jobs/"+id+"/steps/fit/logs", nil).expect(200).object()["logs"].(string)
	if !strings.Contains(log, "real line") || strings.Contains(log, "forged") {
		t.Fatalf("log = %q, want the victim's line and no forged one", log)
	}
}

// TestInProcessWorkersCannotBeNamedOverHTTP: the server's own pool shows
// in GET /api/workers, but no report over HTTP may name one of its
// workers, whatever secret it carries: claim, heartbeat, start, log push
// and complete are all 403, and its step goes on untouched.
func TestInProcessWorkersCannotBeNamedOverHTTP(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pool, err := f.eng.RegisterWorker(ctx, "pool", nil, true, "")
	if err != nil {
		t.Fatal(err)
	}
	id := f.execute("x")
	c, err := f.eng.Claim(ctx, pool, 5*time.Second)
	if err != nil || c == nil || c.JobID != id {
		t.Fatalf("in-process claim = %+v, %v; want step say of %s", c, err, id)
	}
	if err := f.eng.StartStep(ctx, pool, id, c.StepName); err != nil {
		t.Fatal(err)
	}
	other := f.register("other")
	step := "/worker/jobs/" + id + "/steps/" + c.StepName + "/"
	for how, header := range map[string]map[string]string{
		"no secret":      {"Authorization": "Bearer " + workerToken},
		"another secret": {"Authorization": "Bearer " + workerToken, workerproto.SecretHeader: f.secret(other)},
	} {
		t.Run(how, func(t *testing.T) {
			f := f.in(t)
			f.do("POST", "/worker/jobs/claim?wait=0", map[string]any{"worker_id": pool}, header).expectError(403, "in-process")
			f.do("POST", "/worker/heartbeat", map[string]any{"worker_id": pool}, header).expectError(403, "in-process")
			f.do("POST", step+"start", map[string]any{"worker_id": pool}, header).expectError(403, "in-process")
			f.do("POST", "/worker/jobs/"+id+"/logs", logPush(pool, c.StepName, "forged"), header).expectError(403, "in-process")
			f.do("POST", step+"complete", map[string]any{"worker_id": pool, "output": map[string]any{"forged": true}, "exit_code": 0}, header).expectError(403, "in-process")
		})
	}
	say := f.api("GET", "/api/jobs/"+id, nil).expect(200).object()["steps"].([]any)[0].(map[string]any)
	if say["status"] != "running" || say["worker_id"] != pool || say["output"] != nil {
		t.Fatalf("say = %v, want it running for the pool, untouched", say)
	}
}

// TestRegisterWithoutASecretIsRefusedByDefault: the interface's bare
// registration is served only under worker_protocol: interface.
func TestRegisterWithoutASecretIsRefusedByDefault(t *testing.T) {
	f := newFixture(t)
	f.worker("POST", "/worker/register", map[string]any{"name": "bare", "tags": []string{}}).expectError(400, "worker_protocol: interface")
}
