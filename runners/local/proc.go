package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/appliance-sh/appliance/runners"
	"golang.org/x/sys/unix"
)

// runGroup runs cmd in its own process group, streaming its output lines to
// log (with flush, see runners.Step.Flush). When ctx ends the group gets
// SIGTERM, then SIGKILL after grace. When the main process exits, whatever
// remains of its group is killed: a step owns its processes, and a
// background child left running would hold the output pipes open. While it runs, the group is registered with the step
// keeper, which kills it if this process dies.
func runGroup(ctx context.Context, cmd *exec.Cmd, grace time.Duration, log func(stream, line string), flush func()) (int, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("create stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return 0, fmt.Errorf("create stderr pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if marker := stepKeeper.marker(); marker != "" {
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(env[:len(env):len(env)], marker)
	}
	startErr := cmd.Start()
	// The child has its own copies; ours must go so EOF comes when it exits.
	outW.Close()
	errW.Close()
	if startErr != nil {
		outR.Close()
		errR.Close()
		return 0, fmt.Errorf("start %s: %w", cmd.Path, startErr)
	}
	pgid := cmd.Process.Pid
	// Bound to this process's life: if it dies, the keeper kills the group.
	stepKeeper.add(pgid)

	var readers runners.OutputReaders
	readers.Start(outR, runners.Stdout, log, flush)
	readers.Start(errR, runners.Stderr, log, flush)

	exited := make(chan struct{})
	go func() {
		// Wait without reaping: the exited leader keeps the group id reserved
		// until the group is killed below, so the kill cannot hit a reused id.
		waitExited(pgid)
		close(exited)
	}()

	select {
	case <-exited:
	case <-ctx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		timer := time.NewTimer(grace)
		select {
		case <-exited:
		case <-timer.C:
		}
		timer.Stop()
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-exited
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	stepKeeper.remove(pgid) // before the reap frees the group id
	waitErr := cmd.Wait()

	readers.Await(readers.Drained(), runners.ReaderGrace, func() {
		outR.Close()
		errR.Close()
	})
	readers.Wait()

	return exitCode(cmd, waitErr)
}

// waitExited blocks until process pid has exited, leaving it unreaped.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// exitCode maps how the process ended to a shell-style exit code: a process
// killed by a signal reports 128 + the signal number.
func exitCode(cmd *exec.Cmd, waitErr error) (int, error) {
	st := cmd.ProcessState
	if st == nil {
		return 0, fmt.Errorf("wait for %s: %w", cmd.Path, waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return st.ExitCode(), nil
}
