package local

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startGroup starts a process in a process group of its own, killed with
// its group when the test ends, and returns it with a channel closed once
// it has exited.
func startGroup(t *testing.T, env []string, name string, args ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return cmd, exited
}

func waitExit(t *testing.T, what string, exited chan struct{}) {
	t.Helper()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still running 10s after its worker was gone", what)
	}
}

// TestKeeperKillsTheStepsOfAWorkerThatIsGone closes the keeper's pipe as
// the kernel does when the worker dies: the registered group (shell and
// background child) dies, and so does a marked process that was never
// registered; another worker's step lives on.
func TestKeeperKillsTheStepsOfAWorkerThatIsGone(t *testing.T) {
	k := &keeper{live: map[int]bool{}}
	marker := k.marker()
	group, groupExited := startGroup(t, os.Environ(), "sh", "-c", "sleep 300 & wait")
	k.add(group.Process.Pid)
	_, loneExited := startGroup(t, append(os.Environ(), marker), "sleep", "300")
	other, _ := startGroup(t, append(os.Environ(), stepOwnerEnv+"=another-worker"), "sleep", "300")
	if k.process() == nil {
		t.Fatal("no keeper process started")
	}

	k.stop()
	waitExit(t, "the registered step's shell", groupExited)
	eventually(t, 10*time.Second, "the registered step's background child to be gone", func() bool {
		return groupGone(group.Process.Pid)
	})
	waitExit(t, "the marked, unregistered step", loneExited)
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("another worker's step was killed: %v", err)
	}
}

// TestKeeperIsStartedAgainWhenItDies: a keeper killed while steps run is
// replaced, and the replacement knows the live groups.
func TestKeeperIsStartedAgainWhenItDies(t *testing.T) {
	k := &keeper{live: map[int]bool{}}
	group, groupExited := startGroup(t, os.Environ(), "sleep", "300")
	k.add(group.Process.Pid)
	first := k.process()
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "a new keeper", func() bool {
		second := k.process()
		return second != nil && second.Pid != first.Pid
	})
	select {
	case <-groupExited:
		t.Fatal("the step died with its keeper")
	default:
	}
	k.stop()
	waitExit(t, "the step registered with the first keeper", groupExited)
}

// process is the keeper process running now, or nil.
func (k *keeper) process() *os.Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proc
}

// stop closes the keeper's pipe as the kernel does when this process dies:
// the keeper kills what is registered and exits.
func (k *keeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pipe != nil {
		k.pipe.Close()
		k.pipe, k.proc = nil, nil
	}
}
