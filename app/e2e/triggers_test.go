package e2e

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

const triggersWorkspace = `
tasks:
  tick:
    input:
      who: {type: string}
    flow:
      say:
        type: script
        script: |
          echo 'OUTPUT: {"who": "{{ input.who }}"}'
  answer:
    flow:
      reply:
        type: script
        script: |
          echo 'OUTPUT: {"method": "{{ input.method }}", "n": {{ input.body.n }} }'
triggers:
  every-second:
    type: scheduler
    cron: "*/1 * * * * *"
    task: tick
    input: {who: cron}
  answer:
    type: webhook
    name: answer
    task: answer
    mode: sync
    timeout_secs: 30
`

type jobList struct {
	Items []struct {
		JobID      string  `json:"job_id"`
		Status     string  `json:"status"`
		SourceType string  `json:"source_type"`
		SourceID   *string `json:"source_id"`
	} `json:"items"`
}

func TestSchedulerAndWebhookRunRealJobs(t *testing.T) { schedulerAndWebhookRunRealJobs(t) }

func schedulerAndWebhookRunRealJobs(t *testing.T, storage ...func(*config.Server)) {
	dir := filepath.Join(t.TempDir(), "ws")
	writeWorkspace(t, dir, triggersWorkspace)
	f := startFixture(t, map[string]string{"ws": dir}, 2, storage...)

	// The every-second trigger fires jobs that the in-process workers run.
	var done []string
	deadline := time.Now().Add(20 * time.Second)
	for len(done) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d completed trigger jobs after 20 s", len(done))
		}
		var list jobList
		if code := do(t, "GET", f.url+"/api/jobs?workspace=ws&task_name=tick", nil, &list); code != 200 {
			t.Fatalf("list jobs: %d", code)
		}
		done = done[:0]
		for _, j := range list.Items {
			if j.SourceType != "trigger" || j.SourceID == nil || *j.SourceID != "ws/every-second" {
				t.Fatalf("tick job %s has source %s %v, want trigger ws/every-second", j.JobID, j.SourceType, j.SourceID)
			}
			if j.Status == "completed" {
				done = append(done, j.JobID)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range done {
		j := f.job(id)
		if out := j.step("say").Output; !reflect.DeepEqual(out, map[string]any{"who": "cron"}) {
			t.Errorf("trigger job %s output %v, want the trigger's input echoed", id, out)
		}
	}
	last, ok, err := f.srv.db.LastFire("ws", "every-second")
	if err != nil || !ok || time.Since(last) > time.Minute {
		t.Errorf("persisted last fire = %v (found %v, err %v), want a recent one", last, ok, err)
	}

	// A sync webhook call answers with the job's output.
	var answer map[string]any
	if code := do(t, "POST", f.url+"/hooks/answer", map[string]any{"n": 5}, &answer); code != 200 {
		t.Fatalf("webhook call: %d %v", code, answer)
	}
	want := map[string]any{"reply": map[string]any{"method": "POST", "n": 5.0}}
	if answer["status"] != "completed" || answer["trigger"] != "answer" || answer["task"] != "answer" ||
		!reflect.DeepEqual(answer["output"], want) {
		t.Errorf("webhook answer = %v, want completed with output %v", answer, want)
	}
	j := f.job(answer["job_id"].(string))
	if j.Status != "completed" {
		t.Errorf("webhook job is %s", j.Status)
	}
}
