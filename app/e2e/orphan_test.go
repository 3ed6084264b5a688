package e2e

import (
	"syscall"
	"testing"
	"time"
)

// These tests kill a worker process, and a server running in-process
// workers, with SIGKILL while a step runs, and check that none of the
// step's processes outlives it: the step keeper kills them.

// orphanScript runs two sleeps: one in the step's process group (a
// grandchild of the worker, which Pdeathsig on the shell would not reach)
// and one that left the group with setsid.
func orphanScript(inGroup, escaped string) string {
	return "          setsid " + escaped + " &\n          echo started\n          " + inGroup + "\n"
}

// waitGone polls until no live process runs cmdline (a zombie waiting for
// init to reap it runs nothing and does not count).
func waitGone(t *testing.T, cmdline string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for processRunning(t, cmdline) {
		if time.Now().After(deadline) {
			t.Fatalf("%q still running %s after its worker was killed", cmdline, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKilledWorkerLeavesNoStepProcess(t *testing.T) {
	inGroup, escaped := uniqueSleep(), uniqueSleep()
	killAtCleanup(t, inGroup)
	killAtCleanup(t, escaped)
	f, _ := remoteFixture(t, `
tasks:
  slow:
    flow:
      wait:
        type: script
        script: |
`+orphanScript(inGroup, escaped))
	p := startWorkerProcess(t, f.url, workerToken, "doomed", "")
	f.execute("main", "slow", nil)
	waitSleepProcess(t, inGroup)
	waitSleepProcess(t, escaped)

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(10 * time.Second)
	began := time.Now()
	waitGone(t, inGroup, 10*time.Second)
	waitGone(t, escaped, 10*time.Second)
	t.Logf("step processes gone %s after the worker's kill -9", time.Since(began).Round(time.Millisecond))
}

func TestKilledServerLeavesNoStepProcess(t *testing.T) {
	inGroup, escaped := uniqueSleep(), uniqueSleep()
	killAtCleanup(t, inGroup)
	killAtCleanup(t, escaped)
	p := startBinaryServer(t, `tasks:
  slow:
    flow:
      wait:
        type: script
        script: |
`+orphanScript(inGroup, escaped), 1)
	if code, err := tryDo("POST", "http://"+p.addr+"/api/workspaces/ws/tasks/slow/execute", `{"input": {}}`, nil); err != nil || code != 200 {
		t.Fatalf("execute: %d %v", code, err)
	}
	waitSleepProcess(t, inGroup)
	waitSleepProcess(t, escaped)

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	began := time.Now()
	waitGone(t, inGroup, 10*time.Second)
	waitGone(t, escaped, 10*time.Second)
	t.Logf("step processes gone %s after the server's kill -9", time.Since(began).Round(time.Millisecond))
}
