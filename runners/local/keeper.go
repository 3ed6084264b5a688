package local

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A step keeper binds step processes to the life of the process that
// started them (a remote worker, or the server with its in-process
// workers), so a `kill -9` of that process leaves no step running.
//
// It is one small process per worker process, re-executed from this very
// binary (/proc/self/exe) and never from a step: the worker writes it the
// process group of each step it starts ("+pgid") and ends ("-pgid") on a
// pipe. When the worker dies, however it dies, the kernel closes the pipe;
// the keeper reads EOF, kills every group it was told about with SIGKILL,
// and exits. The step itself runs exactly as before, so a step costs two
// small writes, not another process.
//
// Why not Pdeathsig on each step: it signals only the direct child (the
// shell), not the processes it started, and it fires when the *thread*
// that forked the child exits, which a Go program does not control. Why
// not a guard process per step: it would double the processes started per
// step. Why not cgroups: they need privileges a worker rarely has. Pipe EOF
// is per process, needs no privilege and survives SIGKILL.
//
// A step started in the instant between its fork and its registration is
// still found: every step carries stepOwnerEnv=<token> in its environment,
// and on EOF the keeper also kills each process whose initial environment
// holds that token.

// Environment variables of the step keeper.
const (
	// keeperEnv, set in the keeper's own environment, makes the binary run
	// as a keeper (see StepKeeperMain). Steps never see it.
	keeperEnv = "APPLIANCE_STEP_KEEPER"
	// stepOwnerEnv marks every step process with its keeper's token.
	stepOwnerEnv = "APPLIANCE_STEP_OWNER"
)

// keeperEnabled is set by StepKeeperMain: only a binary whose main calls it
// can be re-executed as a keeper.
var keeperEnabled bool

// StepKeeperMain runs this process as a step keeper, and exits, when it was
// started as one; otherwise it returns at once and lets the local runner
// start a keeper from this binary. Call it first thing in main (and in
// TestMain of tests that run steps): a binary that never calls it runs
// steps without the binding.
func StepKeeperMain() {
	token := os.Getenv(keeperEnv)
	if token == "" {
		keeperEnabled = true
		return
	}
	os.Exit(runKeeper(token, os.Stdin))
}

// runKeeper is the keeper process: it follows the registrations on in
// until EOF, then kills what is left of the worker's steps.
func runKeeper(token string, in *os.File) int {
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := sc.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	// The worker is gone (or shut down, leaving nothing registered).
	for pgid := range groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	killMarked(stepOwnerEnv + "=" + token)
	return 0
}

// killMarked kills every process whose initial environment holds marker:
// steps that started but were never registered, and their descendants
// that left the step's process group. Each is killed alone: the group it
// is in now may not be the step's.
func killMarked(marker string) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == marker {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
		}
	}
}

// keeper is the worker's side: it starts the keeper process on first use,
// registers step groups with it, and starts a new one (registering the
// live groups again) if it dies.
type keeper struct {
	mu       sync.Mutex
	token    string
	pipe     *os.File    // the keeper's stdin; nil while none runs
	proc     *os.Process // the keeper process while one runs
	live     map[int]bool
	started  time.Time
	retrying bool // a start is scheduled
	warned   bool
}

// stepKeeper is this process's keeper, shared by every local runner.
var stepKeeper = &keeper{live: map[int]bool{}}

// minKeeperRestart bounds how often a dying keeper is started again.
const minKeeperRestart = time.Second

// marker returns the environment entry that marks a step of this worker,
// or "" when steps run without a keeper.
func (k *keeper) marker() string {
	if !keeperEnabled {
		return ""
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return stepOwnerEnv + "=" + k.tokenLocked()
}

// tokenLocked returns the token that tells this worker's steps from any
// other's, made on first use.
func (k *keeper) tokenLocked() string {
	if k.token == "" {
		k.token = randomID()
	}
	return k.token
}

// add registers a step's process group.
func (k *keeper) add(pgid int) { k.send('+', pgid) }

// remove unregisters a step's process group; call it once the group is
// dead and before its leader is reaped, so the id is not reused meanwhile.
func (k *keeper) remove(pgid int) { k.send('-', pgid) }

func (k *keeper) send(op byte, pgid int) {
	if !keeperEnabled {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if op == '+' {
		k.live[pgid] = true
	} else {
		delete(k.live, pgid)
	}
	if k.pipe == nil {
		k.startLocked() // registers every live group, this one included
		return
	}
	if _, err := fmt.Fprintf(k.pipe, "%c%d\n", op, pgid); err != nil {
		k.pipe.Close()
		k.pipe = nil
		k.startLocked()
	}
}

// startLocked starts a keeper process and registers the live groups with
// it; on failure steps go on unbound, and the next registration retries.
func (k *keeper) startLocked() {
	if wait := minKeeperRestart - time.Since(k.started); wait > 0 {
		if !k.retrying {
			k.retrying = true
			time.AfterFunc(wait, func() {
				k.mu.Lock()
				defer k.mu.Unlock()
				k.retrying = false
				if k.pipe == nil && len(k.live) > 0 {
					k.startLocked()
				}
			})
		}
		return
	}
	k.started = time.Now()
	r, w, err := os.Pipe()
	if err != nil {
		k.warn(err)
		return
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"appliance-step-keeper"}
	cmd.Env = []string{keeperEnv + "=" + k.tokenLocked()}
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	// Its own process group: a Ctrl-C meant for the server must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		k.warn(err)
		return
	}
	k.pipe, k.proc = w, cmd.Process
	for pgid := range k.live {
		if _, err := fmt.Fprintf(w, "+%d\n", pgid); err != nil {
			break
		}
	}
	go k.watch(cmd, w)
}

// watch reaps a keeper process and, if it died while still needed, starts
// another one.
func (k *keeper) watch(cmd *exec.Cmd, pipe *os.File) {
	_ = cmd.Wait()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.pipe != pipe {
		return
	}
	pipe.Close()
	k.pipe, k.proc = nil, nil
	slog.Default().Warn("step keeper exited; starting another", "state", cmd.ProcessState.String())
	if len(k.live) > 0 {
		k.startLocked()
	}
}

func (k *keeper) warn(err error) {
	if !k.warned {
		k.warned = true
		slog.Default().Warn("cannot start the step keeper: steps will not be killed if this process is killed", "err", err)
	}
}

// randomID is a random hex id: the keeper's token.
func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
