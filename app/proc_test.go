package app

import (
	"os"
	"strconv"
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
