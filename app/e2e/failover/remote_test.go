package failover_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/appliance-sh/appliance/api/wire"
)

const workerToken = "failover-test-worker-token"

// startWorker runs `appliance worker`, built from the tree, with tags
// [remote] and one slot, told both replicas' addresses (server_urls); it
// is stopped (SIGTERM, then SIGKILL) when the test ends.
func (p *pair) startWorker(replicas ...*replica) {
	t := p.t
	t.Helper()
	home := filepath.Join(p.dir, "worker")
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	urls := make([]string, len(replicas))
	for i, r := range replicas {
		urls[i] = r.url
	}
	cfg := fmt.Sprintf(`server_urls: [%s]
worker_token: %s
worker_name: remote-1
tags: [remote]
max_concurrent: 1
workspace_cache_dir: %s
spool_dir: %s
heartbeat_interval: 200ms
log_push_interval: 100ms
retry_min_interval: 50ms
retry_max_interval: 300ms
`, strings.Join(urls, ", "), workerToken, filepath.Join(home, "cache"), filepath.Join(home, "spool"))
	cfgPath := filepath.Join(home, "worker-config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(home, "worker.log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, "worker", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(home, "tmp"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out.Close()
		if t.Failed() || os.Getenv("FAILOVER_LOGS") != "" {
			b, _ := os.ReadFile(logPath)
			t.Logf("the worker's log:\n%s", tail(string(b), 100))
		}
	})
}

// stepRows reads job id's steps from the database, by name: the rows
// themselves, not what a replica's memory makes of them.
func (p *pair) stepRows(id string) map[string]int {
	p.t.Helper()
	rows, err := p.connect().Query(context.Background(), `SELECT name, count(*) FROM steps WHERE job_id = $1 GROUP BY name`, id)
	if err != nil {
		p.t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var name string
		var c int
		if err := rows.Scan(&name, &c); err != nil {
			p.t.Fatal(err)
		}
		n[name] = c
	}
	if err := rows.Err(); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// TestRemoteStepAndChainSurviveAKillNine kills the leader with SIGKILL
// while a remote worker (its own process, told both replicas) runs a step
// that waits for a file the test creates only once the follower leads,
// and while a 40-step chain runs on the leader's in-process workers. The
// remote step keeps running through the failover and runs once; its
// result, spooled by the worker, is accepted by the new leader (the job
// completes, its log line is in the job's log); the chain completes on
// the new leader, no step completed at the kill runs again, and the step
// the kill interrupted runs again only as its next attempt.
func TestRemoteStepAndChainSurviveAKillNine(t *testing.T) {
	dir := t.TempDir()
	remoteRuns, chainRuns, goFile := filepath.Join(dir, "remote-runs"), filepath.Join(dir, "chain-runs"), filepath.Join(dir, "go")
	const marker = "remote step saw the takeover"
	var yaml strings.Builder
	fmt.Fprintf(&yaml, `tasks:
  remote:
    flow:
      wait:
        type: script
        tags: [remote]
        retries: 2
        retry_delay: 1s
        script: |
          echo "start $APPLIANCE_JOB_ID $APPLIANCE_STEP $(date +%%s%%N)" >> %s
          while [ ! -e %s ]; do sleep 0.05; done
          echo "%s"
          echo "end $APPLIANCE_JOB_ID $APPLIANCE_STEP $(date +%%s%%N)" >> %s
  chain:
    flow:
`, remoteRuns, goFile, marker, remoteRuns)
	const chainLen = 40
	for i := 1; i <= chainLen; i++ {
		dep := ""
		if i > 1 {
			dep = fmt.Sprintf("s%02d", i-1)
		}
		yaml.WriteString(stepScript(fmt.Sprintf("s%02d", i), dep, chainRuns, "0.05"))
	}
	p := newPair(t, yaml.String())
	p.serverYAML = "worker_token: " + workerToken + "\n"
	a := p.start("a", 2)
	waitFor(t, 10*time.Second, "replica a to lead", a.leads)
	p.recordWrites()
	b := p.start("b", 2)
	waitFor(t, 5*time.Second, "replica b to follow a", func() bool {
		st, err := b.status()
		return err == nil && !st.Leading && st.Leader == a.url
	})
	p.startWorker(a, b)

	remoteID, err := execute(t, "remote", uuid.NewString(), a)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the remote step to begin on the worker", func() bool { return len(readRuns(t, remoteRuns)) == 1 })
	chainID, err := execute(t, "chain", uuid.NewString(), a)
	if err != nil {
		t.Fatal(err)
	}
	chainDone := func() int {
		n := 0
		for k := range p.completedSteps() {
			if strings.HasPrefix(k, chainID+" ") {
				n++
			}
		}
		return n
	}
	waitFor(t, 15*time.Second, "the chain to complete 10 steps on the leader", func() bool { return chainDone() >= 10 })

	before := p.epoch()
	killedAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.cmd.Wait()
	// The dead leader writes nothing more and the follower none before it
	// takes the lease (the fence): what is completed now is what a did.
	completedAtKill := p.completedSteps()
	if p.epoch() != before {
		t.Fatal("the lease moved on before the kill's snapshot: the test cannot tell a's steps from b's")
	}
	waitFor(t, lease+renew+5*time.Second, "replica b to lead", b.leads)
	t.Logf("b leads %s after the kill; the chain had %d steps completed", time.Since(killedAt).Round(time.Millisecond), chainDone())

	// The remote step ran through the failover: it is still waiting.
	if runs := readRuns(t, remoteRuns); len(runs) != 1 || runs[0].what != "start" {
		t.Fatalf("the remote step's runs at the takeover: %+v, want one start and no end", runs)
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	remote := b.waitEnded(t, remoteID, 20*time.Second)
	if remote.Status != "completed" || len(remote.Steps) != 1 || remote.Steps[0].Status != "completed" || remote.Steps[0].Attempt != 1 {
		t.Fatalf("remote job %s: %s, steps %+v; want completed, its step on its first attempt", remoteID, remote.Status, remote.Steps)
	}
	if w := remote.Steps[0].WorkerID; w == nil || *w == "" {
		t.Errorf("the remote step has no worker")
	}
	runs := readRuns(t, remoteRuns)
	if len(runs) != 2 || runs[0].what != "start" || runs[1].what != "end" {
		t.Errorf("the remote step's runs: %+v, want one start and one end: it ran once", runs)
	}
	if rows := p.stepRows(remoteID); rows["wait"] != 1 || len(rows) != 1 {
		t.Errorf("the remote job's step rows: %v, want one", rows)
	}
	var logs wire.Logs
	if code, err := call("GET", b.url+"/api/jobs/"+remoteID+"/logs", "", nil, &logs); err != nil || code != 200 {
		t.Fatalf("the remote job's logs: %d %v", code, err)
	}
	if n := strings.Count(logs.Logs, marker); n != 1 {
		t.Errorf("the remote step's line is %d times in the job's log, want once:\n%s", n, logs.Logs)
	}

	chain := b.waitEnded(t, chainID, 30*time.Second)
	if chain.Status != "completed" || len(chain.Steps) != chainLen {
		t.Fatalf("chain job %s: %s with %d steps, want completed with %d", chainID, chain.Status, len(chain.Steps), chainLen)
	}
	starts := map[string]int{}
	for _, r := range readRuns(t, chainRuns) {
		if r.what == "start" && r.job == chainID {
			starts[r.step]++
		}
	}
	again, atKill := 0, 0
	for _, s := range chain.Steps {
		if completedAtKill[chainID+" "+s.StepName] {
			atKill++
		}
		switch {
		case s.Status != "completed":
			t.Errorf("chain step %s: %s", s.StepName, s.Status)
		case completedAtKill[chainID+" "+s.StepName] && starts[s.StepName] != 1:
			t.Errorf("chain step %s, completed at the kill, began %d times", s.StepName, starts[s.StepName])
		case starts[s.StepName] > s.Attempt:
			t.Errorf("chain step %s began %d times, but its attempt is %d: a run was doubled", s.StepName, starts[s.StepName], s.Attempt)
		case starts[s.StepName] < s.Attempt-1:
			// The attempt the kill interrupted may not have begun its
			// process yet (its start was recorded, its script not run):
			// one attempt with no run, never more.
			t.Errorf("chain step %s began %d times, but its attempt is %d: more than the interrupted attempt went without a run", s.StepName, starts[s.StepName], s.Attempt)
		case s.Attempt > 1:
			again++
		}
	}
	if again > 1 {
		t.Errorf("%d chain steps ran again; the kill interrupts at most one step of a chain", again)
	}
	t.Logf("remote step ran once across the failover and its result was accepted by b; chain: %d steps completed at the kill, %d interrupted and run again as the next attempt",
		atKill, again)
}
