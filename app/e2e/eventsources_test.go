package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// eventsWorkspace has an event source whose consumer emits events 1..N (from
// APPLIANCE_EVENT_OFFSET on, so a restarted consumer resumes after the
// events the server accepted) into a target task of one `true` step.
func eventsWorkspace(n, maxInFlight int, policy string) string {
	return fmt.Sprintf(`
tasks:
  produce:
    flow:
      emit:
        type: script
        script: |
          i=$((APPLIANCE_EVENT_OFFSET + 1))
          while [ $i -le %d ]; do echo "OUTPUT: {\"n\": $i}"; i=$((i + 1)); done
  handle:
    input:
      n: {type: integer, required: true}
      origin: {type: string}
    flow:
      ok:
        type: script
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    input: {origin: numbers, n: 0}
    restart_policy: %s
    max_in_flight: %d
`, n, policy, maxInFlight)
}

// targetJob is a target job as the job list shows it.
type targetJob struct {
	JobID       string     `json:"job_id"`
	Status      string     `json:"status"`
	SourceType  string     `json:"source_type"`
	SourceID    *string    `json:"source_id"`
	CreatedAt   time.Time  `json:"created_at"`
	CompletedAt *time.Time `json:"completed_at"`
}

// listJobs pages through every job of a task.
func listJobs(t testing.TB, base, ws, task string) []targetJob {
	t.Helper()
	var all []targetJob
	for offset := 0; ; {
		var page struct {
			Items []targetJob `json:"items"`
			Total int         `json:"total"`
		}
		q := url.Values{"workspace": {ws}, "task_name": {task}, "limit": {"100"}, "offset": {fmt.Sprint(offset)}}
		if code := do(t, "GET", base+"/api/jobs?"+q.Encode(), nil, &page); code != 200 {
			t.Fatalf("list jobs: %d", code)
		}
		all = append(all, page.Items...)
		offset += len(page.Items)
		if len(page.Items) == 0 || offset >= page.Total {
			return all
		}
	}
}

// inFlightPeak is the most target jobs ever pending or running at once,
// from their creation and completion times.
func inFlightPeak(jobs []targetJob) int {
	peak := 0
	for _, a := range jobs {
		n := 0
		for _, b := range jobs {
			if !b.CreatedAt.After(a.CreatedAt) && (b.CompletedAt == nil || b.CompletedAt.After(a.CreatedAt)) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// checkEvents waits until the target task has want jobs, all completed,
// and checks each event 1..want made exactly one of them.
func checkEvents(t *testing.T, base, ws string, want, maxInFlight int) []targetJob {
	return checkEventsEnded(t, base, ws, want, maxInFlight, false)
}

// checkEventsEnded is checkEvents; with crashed, a target job may have
// failed instead (its step ran on an in-process worker of a killed server).
func checkEventsEnded(t *testing.T, base, ws string, want, maxInFlight int, crashed bool) []targetJob {
	t.Helper()
	// 500 jobs of a process each take a while on a busy machine: a longer
	// deadline than waitFor's, and a summary rather than the list.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		jobs := listJobs(t, base, ws, "handle")
		ended := 0
		for _, j := range jobs {
			if j.Status == "completed" || crashed && j.Status == "failed" {
				ended++
			}
		}
		if len(jobs) >= want && ended == len(jobs) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes %d target jobs, %d ended; want %d", len(jobs), ended, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Settle: nothing more arrives.
	time.Sleep(300 * time.Millisecond)
	jobs := listJobs(t, base, ws, "handle")
	if len(jobs) != want {
		t.Fatalf("%d target jobs, want exactly %d", len(jobs), want)
	}
	seen := map[float64]int{}
	f := &serverFixture{t: t, url: base}
	for _, j := range jobs {
		if j.SourceType != "trigger" || j.SourceID == nil || *j.SourceID != ws+"/numbers" {
			t.Fatalf("target job %s source %s %v, want trigger %s/numbers", j.JobID, j.SourceType, j.SourceID, ws)
		}
		in := f.job(j.JobID).Input
		if in["origin"] != "numbers" {
			t.Fatalf("target job %s input %v lacks the trigger's input", j.JobID, in)
		}
		n, _ := in["n"].(float64)
		seen[n]++
	}
	for i := 1; i <= want; i++ {
		if seen[float64(i)] != 1 {
			t.Fatalf("event %d made %d jobs, want 1", i, seen[float64(i)])
		}
	}
	if maxInFlight > 0 {
		if peak := inFlightPeak(jobs); peak > maxInFlight {
			t.Fatalf("%d target jobs were pending or running at once, max_in_flight is %d", peak, maxInFlight)
		}
	}
	return jobs
}

func TestEventSourceMakesOneJobPerEventWithinMaxInFlight(t *testing.T) {
	eventSourceMakesOneJobPerEvent(t, 500)
}

// eventSourceMakesOneJobPerEvent runs an event source of the given
// number of events with max_in_flight 2.
func eventSourceMakesOneJobPerEvent(t *testing.T, events int, storage ...func(*config.Server)) {
	dir := filepath.Join(t.TempDir(), "ws")
	writeWorkspace(t, dir, eventsWorkspace(events, 2, "never"))
	f := startFixture(t, map[string]string{"ws": dir}, 4, storage...)

	// Observed live too: never more than 2 pending or running.
	stop := make(chan struct{})
	peak := make(chan int)
	go func() {
		p := 0
		for {
			select {
			case <-stop:
				peak <- p
				return
			default:
			}
			var page struct {
				Items []targetJob `json:"items"`
			}
			if code, err := tryDo("GET", f.url+"/api/jobs?workspace=ws&task_name=handle&limit=20", "", &page); err == nil && code == 200 {
				n := 0
				for _, j := range page.Items {
					if j.Status == "pending" || j.Status == "running" {
						n++
					}
				}
				p = max(p, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	checkEvents(t, f.url, "ws", events, 2)
	close(stop)
	if p := <-peak; p > 2 {
		t.Fatalf("saw %d target jobs pending or running at once, max_in_flight is 2", p)
	}
	tr := waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.State == "stopped" })
	if tr.ConsumerJobID == nil || tr.Restarts != 0 {
		t.Fatalf("trigger %+v: want the consumer job and no restart (restart_policy: never)", tr)
	}
	if j := f.job(*tr.ConsumerJobID); j.Status != "completed" {
		t.Fatalf("consumer job %s is %s, want completed", j.JobID, j.Status)
	}
}

// triggerInfo is an event source in GET /api/workspaces/{ws}/triggers.
type triggerInfo struct {
	Name          string  `json:"name"`
	ConsumerJobID *string `json:"consumer_job_id"`
	State         string  `json:"state"`
	Restarts      int     `json:"restarts"`
}

func waitTrigger(t *testing.T, base, ws, name string, cond func(triggerInfo) bool) triggerInfo {
	t.Helper()
	return waitFor(t, "trigger "+name, func() triggerInfo {
		var list []triggerInfo
		if code := do(t, "GET", base+"/api/workspaces/"+ws+"/triggers", nil, &list); code != 200 {
			t.Fatalf("list triggers: %d", code)
		}
		for _, tr := range list {
			if tr.Name == name {
				return tr
			}
		}
		return triggerInfo{}
	}, cond)
}

func TestEventSourceBadEventsAreWarningsAndTheConsumerGoesOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	writeWorkspace(t, dir, `
tasks:
  produce:
    flow:
      emit:
        type: script
        env: {WHO: action}
        script: |
          echo 'OUTPUT: {not json'
          echo 'OUTPUT: {"n": "not a number"}'
          echo "OUTPUT: {\"n\": 1, \"origin\": \"$WHO-$FROM\"}"
          echo done
  handle:
    input:
      n: {type: integer, required: true}
      origin: {type: string}
    flow:
      ok:
        type: script
        script: "true"
secrets:
  PLACE: garden
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    input: {origin: default}
    env: {WHO: trigger, FROM: "{{ secret.PLACE }}-side"}
    restart_policy: never
`)
	f := startFixture(t, map[string]string{"ws": dir}, 2)
	tr := waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.State == "stopped" })
	j := f.waitTerminal(*tr.ConsumerJobID)
	if j.Status != "completed" {
		t.Fatalf("consumer %s, want completed despite bad events", j.Status)
	}
	logs := f.logs(j.JobID, "")
	for _, want := range []string{"malformed JSON after OUTPUT", "expected integer"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("consumer log lacks a warning with %q:\n%s", want, logs)
		}
	}
	jobs := waitFor(t, "one target job", func() []targetJob { return listJobs(t, f.url, "ws", "handle") },
		func(jobs []targetJob) bool { return len(jobs) >= 1 })
	if len(jobs) != 1 {
		t.Fatalf("%d target jobs, want 1 (two events were bad)", len(jobs))
	}
	// The trigger's env, rendered with secret.*, is on top of the action's
	// (the secret's value is masked in the answer, as everywhere).
	if in := f.job(jobs[0].JobID).Input; in["origin"] != "trigger-***-side" || in["n"] != float64(1) {
		t.Fatalf("target input %v, want origin trigger-***-side (the trigger's env, secret masked) and n 1", in)
	}
}

func TestHotReloadDisablingAnEventSourceStopsItsConsumer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	yaml := `
tasks:
  produce:
    flow:
      wait:
        type: script
        script: sleep 600
  handle:
    flow:
      ok:
        type: script
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    enabled: ENABLED
`
	writeWorkspace(t, dir, strings.Replace(yaml, "ENABLED", "true", 1))
	f := startFixture(t, map[string]string{"ws": dir}, 2)
	tr := waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.State == "running" && tr.ConsumerJobID != nil })
	first := *tr.ConsumerJobID
	f.waitJob(first, "running", func(j jobView) bool { return j.step("wait").Status == "running" })

	// A change replaces the consumer: the old job is cancelled, a new one runs.
	writeWorkspace(t, dir, strings.Replace(yaml, "ENABLED", "true\n    backoff_secs: 7", 1))
	tr = waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool {
		return tr.State == "running" && tr.ConsumerJobID != nil && *tr.ConsumerJobID != first
	})
	if j := f.waitTerminal(first); j.Status != "cancelled" {
		t.Fatalf("replaced consumer %s, want cancelled", j.Status)
	}
	second := *tr.ConsumerJobID

	writeWorkspace(t, dir, strings.Replace(yaml, "ENABLED", "false", 1))
	if j := f.waitTerminal(second); j.Status != "cancelled" {
		t.Fatalf("consumer of the disabled trigger %s, want cancelled", j.Status)
	}
	waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.State == "stopped" })
	if n := len(listJobs(t, f.url, "ws", "produce")); n != 2 {
		t.Fatalf("%d consumer jobs, want 2 (none started for the disabled trigger)", n)
	}
}

// TestEventSourceRestartPolicies runs a consumer that exits at once (with
// status 0 or 1) under each policy, with backoff_secs 1.
func TestEventSourceRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		exit    int
		restart bool
	}{
		{"always", 0, true},
		{"on_failure", 1, true},
		{"on_failure", 0, false},
		{"never", 1, false},
	} {
		t.Run(fmt.Sprintf("%s_exit_%d", tc.policy, tc.exit), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			writeWorkspace(t, dir, fmt.Sprintf(`
tasks:
  produce:
    flow:
      quit:
        type: script
        script: exit %d
  handle:
    flow:
      ok:
        type: script
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    restart_policy: %s
    backoff_secs: 1
`, tc.exit, tc.policy))
			f := startFixture(t, map[string]string{"ws": dir}, 2)
			if tc.restart {
				tr := waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.Restarts >= 2 })
				jobs := listJobs(t, f.url, "ws", "produce")
				if len(jobs) < 3 {
					t.Fatalf("%d consumer jobs after %d restarts, want at least 3", len(jobs), tr.Restarts)
				}
				// Backoff doubles: 1 s then 2 s between the first three.
				sort.Slice(jobs, func(i, j int) bool { return jobs[i].CreatedAt.Before(jobs[j].CreatedAt) })
				if gap := jobs[2].CreatedAt.Sub(jobs[1].CreatedAt); gap < 1900*time.Millisecond {
					t.Fatalf("second restart %v after the first, want about 2 s (backoff doubles)", gap)
				}
				return
			}
			tr := waitTrigger(t, f.url, "ws", "numbers", func(tr triggerInfo) bool { return tr.State == "stopped" })
			time.Sleep(1500 * time.Millisecond) // longer than the backoff: a restart would show
			if jobs := listJobs(t, f.url, "ws", "produce"); len(jobs) != 1 || tr.Restarts != 0 {
				t.Fatalf("%d consumer jobs, %d restarts; want 1 and none", len(jobs), tr.Restarts)
			}
		})
	}
}

// TestKillNineDuringAnEventSourceLosesAndDoublesNoEvent kills the real
// server binary with SIGKILL while 500 events go through max_in_flight 2,
// restarts it on the same data: the consumer starts again after the events
// accepted (APPLIANCE_EVENT_OFFSET), and each event has exactly one job.
func TestKillNineDuringAnEventSourceLosesAndDoublesNoEvent(t *testing.T) {
	p := startBinaryServer(t, eventsWorkspace(500, 2, "never"), 4)
	base := "http://" + p.addr
	waitFor(t, "some target jobs", func() int {
		var page struct {
			Total int `json:"total"`
		}
		if code, err := tryDo("GET", base+"/api/jobs?workspace=ws&task_name=handle&limit=1", "", &page); err != nil || code != 200 {
			return 0
		}
		return page.Total
	}, func(n int) bool { return n >= 150 })
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.restart()
	jobs := checkEventsEnded(t, base, "ws", 500, 2, true)
	failed := 0
	for _, j := range jobs {
		if j.Status == "failed" {
			failed++
		}
	}
	consumers := listJobs(t, base, "ws", "produce")
	if len(consumers) != 2 {
		t.Fatalf("%d consumer jobs, want 2 (one per server run)", len(consumers))
	}
	t.Logf("killed after >= 150 target jobs; after restart exactly 500, one per event (%d failed with the killed workers)", failed)
}

// TestEventSourceThroughARemoteWorkerSurvivesKillNine runs the consumer and
// the target jobs on a real `appliance worker` process, kills the server
// binary with SIGKILL in the middle and restarts it: the worker's consumer
// goes on (the server adopts its job), its spool pushes again what the dead
// server never answered, and each of the 500 events has exactly one job.
func TestEventSourceThroughARemoteWorkerSurvivesKillNine(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "server-config.yaml")
	writeFile(t, cfg, "worker_token: "+workerToken+"\n")
	p := startBinaryServer(t, eventsWorkspace(500, 2, "never"), 0, "--config", cfg)
	base := "http://" + p.addr
	startWorkerProcess(t, base, workerToken, "remote-1", "max_concurrent: 4\n")
	waitFor(t, "some target jobs", func() int {
		var page struct {
			Total int `json:"total"`
		}
		if code, err := tryDo("GET", base+"/api/jobs?workspace=ws&task_name=handle&limit=1", "", &page); err != nil || code != 200 {
			return 0
		}
		return page.Total
	}, func(n int) bool { return n >= 150 })
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.restart()
	checkEvents(t, base, "ws", 500, 2)
	if consumers := listJobs(t, base, "ws", "produce"); len(consumers) != 1 || consumers[0].Status != "completed" {
		t.Fatalf("consumer jobs %+v, want the one adopted after the restart, completed", consumers)
	}
}

// TestEventSourceBackPressureBlocksTheConsumer has a consumer write 300
// large events (8 KB each, so the pipe holds few) while max_in_flight 1
// lets one slow target job run at a time: the consumer process is held on
// its writes, never more than the worker's few undelivered events (and a
// pipe's worth) ahead of the jobs the server accepted.
func TestEventSourceBackPressureBlocksTheConsumer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	progress := filepath.Join(t.TempDir(), "progress")
	writeWorkspace(t, dir, `
tasks:
  produce:
    flow:
      emit:
        type: script
        script: |
          pad=$(head -c 8000 /dev/zero | tr '\0' x)
          i=1
          while [ $i -le 300 ]; do
            echo "OUTPUT: {\"n\": $i, \"pad\": \"$pad\"}"
            echo $i > "$PROGRESS"
            i=$((i + 1))
          done
  handle:
    input:
      n: {type: integer}
      pad: {type: string}
    flow:
      ok:
        type: script
        script: sleep 0.05
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
    env: {PROGRESS: "`+progress+`"}
    restart_policy: never
    max_in_flight: 1
`)
	f := startFixture(t, map[string]string{"ws": dir}, 2)
	written := func() int {
		b, _ := os.ReadFile(progress)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	waitUntil(t, "20 target jobs", func() bool { return len(listJobs(t, f.url, "ws", "handle")) >= 20 })
	// What may lie between the consumer's last write and the server: 64
	// undelivered events in the worker's journal, the line its reader waits
	// to log, the reader's 64 KB line buffer and the 64 KB pipe (each 8
	// lines of 8 KB, and part of a ninth), and the line being written.
	const ahead = 64 + 1 + 2*9 + 1
	for i := 0; i < 10; i++ {
		// Written first: the accepted count read after it can only have
		// grown, so the bound holds for the moment written was read.
		w := written()
		if accepted := len(listJobs(t, f.url, "ws", "handle")); w > accepted+ahead {
			t.Fatalf("the consumer wrote %d events while %d were accepted: not held back", w, accepted)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if w := written(); w >= 300 {
		t.Fatalf("the consumer wrote all its events at once (%d): not held back", w)
	}
	t.Logf("consumer held at %d written events with %d accepted", written(), len(listJobs(t, f.url, "ws", "handle")))
}

// TestRepeatedEventPushCreatesNoJobTwice speaks the worker protocol by hand:
// the claim of a consumer step says event_source, and a log push repeated
// (its answer lost, say) or overlapping the last one creates each event's
// job once; a new run of the step numbers afresh.
func TestRepeatedEventPushCreatesNoJobTwice(t *testing.T) {
	f, _ := remoteFixture(t, `
tasks:
  produce:
    flow:
      emit:
        type: script
        script: "true"
  handle:
    input:
      n: {type: integer}
    flow:
      ok:
        type: script
        script: "true"
triggers:
  numbers:
    type: event_source
    task: produce
    target_task: handle
`)
	var reg struct {
		WorkerID string `json:"worker_id"`
		Secret   string `json:"worker_secret"`
	}
	if code, e := workerCall(t, f.url, workerToken, "", "POST", "/worker/register", map[string]any{"name": "by-hand", "tags": []string{}, "want_secret": true}, &reg); code != 200 {
		t.Fatalf("register: %d %s", code, e)
	}
	var claim struct {
		JobID       string `json:"job_id"`
		StepName    string `json:"step_name"`
		EventSource bool   `json:"event_source"`
	}
	if code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/claim?wait=5", map[string]any{"worker_id": reg.WorkerID, "tags": []string{}}, &claim); code != 200 || claim.StepName != "emit" || !claim.EventSource {
		t.Fatalf("claim: %d %s %+v; want the consumer step, event_source true", code, e, claim)
	}
	if code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/"+claim.JobID+"/steps/emit/start", map[string]any{"worker_id": reg.WorkerID}, nil); code != 200 {
		t.Fatalf("start: %d %s", code, e)
	}
	push := func(run string, from, to int) {
		t.Helper()
		var lines []map[string]any
		for i := from; i <= to; i++ {
			lines = append(lines, map[string]any{"seq": i, "ts": time.Now().UTC(), "stream": "stdout", "line": fmt.Sprintf(`OUTPUT: {"n": %d}`, i)})
		}
		body := map[string]any{"worker_id": reg.WorkerID, "step_name": "emit", "run": run, "lines": lines}
		if code, e := workerCall(t, f.url, workerToken, reg.Secret, "POST", "/worker/jobs/"+claim.JobID+"/logs", body, nil); code != 200 {
			t.Fatalf("push %s %d..%d: %d %s", run, from, to, code, e)
		}
	}
	push("run-1", 1, 3)
	push("run-1", 1, 3) // the same push again
	push("run-1", 2, 5) // overlapping: 4 and 5 are new
	if n := len(listJobs(t, f.url, "main", "handle")); n != 5 {
		t.Fatalf("%d target jobs after pushes of events 1..5 with repeats, want 5", n)
	}
	push("run-2", 1, 2) // a new run of the step numbers from 1 again
	if n := len(listJobs(t, f.url, "main", "handle")); n != 7 {
		t.Fatalf("%d target jobs after a second run's 2 events, want 7", n)
	}
	// The log has each line once.
	if logs := f.logs(claim.JobID, "emit"); strings.Count(logs, `OUTPUT: {\"n\": 3}`) != 1 || strings.Count(logs, `OUTPUT: {\"n\": 1}`) != 2 {
		t.Fatalf("consumer log, want event 3 once and event 1 once per run:\n%s", logs)
	}
}

// TestEventSourceConsumerLeavesTheOnlyJobSlotFree runs the default server
// as on a 1-CPU machine (one job slot) with an event source like the
// examples' (a consumer blocked on tail -F for as long as it runs): the
// consumer runs in a slot of its own, so an ordinary job, and a job of an
// event, still run while it does.
func TestEventSourceConsumerLeavesTheOnlyJobSlotFree(t *testing.T) {
	dir := t.TempDir()
	inbox := filepath.Join(dir, "inbox.txt")
	if err := os.WriteFile(inbox, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writeWorkspace(t, dir, fmt.Sprintf(`
tasks:
  watch:
    flow:
      tail:
        type: script
        script: |
          tail -n "+$((APPLIANCE_EVENT_OFFSET + 1))" -F "$INBOX" | while IFS= read -r line; do
            printf 'OUTPUT: {"message": "%%s"}\n' "$line"
          done
  handle:
    input:
      message: {type: string, required: true}
    flow:
      echo:
        type: script
        script: 'echo "got $INPUT_MESSAGE"'
  hello:
    flow:
      greet:
        type: script
        script: echo hello
triggers:
  inbox:
    type: event_source
    task: watch
    target_task: handle
    env: {INBOX: %q}
    restart_policy: always
`, inbox))
	f := startFixture(t, map[string]string{"ws": dir}, 1)
	running := func() bool {
		jobs := listJobs(t, f.url, "ws", "watch")
		return len(jobs) == 1 && jobs[0].Status == "running"
	}
	waitUntil(t, "the consumer to run", running)
	waitFor(t, "the consumer's step to start", func() jobView { return f.job(listJobs(t, f.url, "ws", "watch")[0].JobID) },
		func(j jobView) bool { return j.step("tail").Status == "running" })

	id := f.execute("ws", "hello", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job beside the consumer: %s, want completed", j.Status)
	}
	if err := os.WriteFile(inbox, []byte("ping\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	handled := waitFor(t, "the event's job to complete", func() []targetJob { return listJobs(t, f.url, "ws", "handle") },
		func(js []targetJob) bool { return len(js) == 1 && js[0].Status == "completed" })
	if out := f.logs(handled[0].JobID, "echo"); !strings.Contains(out, "got ping") {
		t.Errorf("event job log: %q", out)
	}
	if !running() {
		t.Error("the consumer stopped")
	}
}
