package e2e

import (
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func procPIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func readProc(pid int, file string) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	return string(b), err
}

// procInfo is what the tests read of a process in /proc.
type procInfo struct {
	cmdline string // its arguments joined by spaces
	state   string // R, S, Z (zombie), …
	pgid    int
}

// live reports whether the process has not exited. An exited orphan stays
// a zombie until init reaps it, which here may take a second or more; it
// runs nothing, so it does not count.
func (p procInfo) live() bool { return p.state != "Z" && p.state != "X" }

var procStat = regexp.MustCompile(`^\d+ \(.*\) (\S) \d+ (\d+)`)

// processes lists the processes in /proc; one that exits while it is
// read is left out.
func processes() ([]procInfo, error) {
	pids, err := procPIDs()
	if err != nil {
		return nil, err
	}
	var out []procInfo
	for _, pid := range pids {
		stat, err := readProc(pid, "stat")
		if err != nil {
			continue
		}
		m := procStat.FindStringSubmatch(stat)
		if m == nil {
			continue
		}
		pgid, err := strconv.Atoi(m[2])
		if err != nil {
			continue
		}
		cmd, _ := readProc(pid, "cmdline")
		out = append(out, procInfo{
			cmdline: strings.ReplaceAll(strings.TrimRight(cmd, "\x00"), "\x00", " "),
			state:   m[1],
			pgid:    pgid,
		})
	}
	return out, nil
}

// findProcessGroup returns the process group of a process running cmdline.
func findProcessGroup(cmdline string) (int, error) {
	procs, err := processes()
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		if p.cmdline == cmdline {
			return p.pgid, nil
		}
	}
	return 0, errors.New("not found")
}

// processRunning reports whether a process that has not exited runs cmdline.
func processRunning(t testing.TB, cmdline string) bool {
	t.Helper()
	return anyLiveProcess(t, func(p procInfo) bool { return p.cmdline == cmdline })
}

// groupRunning reports whether a process of the group has not exited yet.
func groupRunning(t testing.TB, pgid int) bool {
	t.Helper()
	return anyLiveProcess(t, func(p procInfo) bool { return p.pgid == pgid })
}

func anyLiveProcess(t testing.TB, match func(procInfo) bool) bool {
	t.Helper()
	procs, err := processes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.live() && match(p) {
			return true
		}
	}
	return false
}
