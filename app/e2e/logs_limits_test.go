package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// floodWorkspace has a step that prints 200 MB in 1000-byte lines, one
// that prints a 5000-byte line, and a quiet one.
const floodWorkspace = `tasks:
  flood:
    flow:
      big:
        type: script
        script: yes "$(head -c 999 /dev/zero | tr '\0' x)" | head -c 200000000
      after:
        depends_on: [big]
        type: script
        script: echo still here
  wide:
    flow:
      long:
        type: script
        script: |
          head -c 5000 /dev/zero | tr '\0' w; echo
          echo short
`

// eachStoredLine calls fn with each line of the job's JSONL log file, its
// index and its raw bytes (newline included).
func eachStoredLine(t *testing.T, logDir, jobID string, fn func(i int, raw []byte, step, line string)) {
	t.Helper()
	f, err := os.Open(filepath.Join(logDir, jobID+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	for i := 0; ; i++ {
		raw, err := br.ReadBytes('\n')
		if len(raw) == 0 && err != nil {
			return
		}
		var l struct{ Step, Line string }
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("stored line %.100q: %v", raw, err)
		}
		fn(i, raw, l.Step, l.Line)
	}
}

// storedLog sums, from the job's JSONL file, the bytes of each step and
// notes where each step's first line is; it returns the _server lines.
func storedLog(t *testing.T, logDir, jobID string) (bytesOf map[string]int64, first map[string]int, server []string) {
	t.Helper()
	bytesOf, first = map[string]int64{}, map[string]int{}
	eachStoredLine(t, logDir, jobID, func(i int, raw []byte, step, line string) {
		bytesOf[step] += int64(len(line)) + 1 // printed: the step_log unit
		if _, ok := first[step]; !ok {
			first[step] = i
		}
		if step == "_server" {
			first[line] = i
			server = append(server, line)
		}
	})
	return bytesOf, first, server
}

// TestStepPrinting200MBEndsWithItsLogCappedAndOneWarning runs, with the
// in-process workers and the default 100MB step_log limit, a step that
// prints 200 MB: its stored log stops at the limit, one _server line says
// so, and the step and the job still complete.
func TestStepPrinting200MBEndsWithItsLogCappedAndOneWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 200 MB; skipped with -short")
	}
	ws := t.TempDir()
	writeWorkspace(t, ws, floodWorkspace)
	f := startFixture(t, map[string]string{"main": ws}, 1)
	began := time.Now()
	id := f.execute("main", "flood", nil)
	deadline := time.Now().Add(3 * time.Minute)
	for j := f.job(id); j.Status != "completed"; j = f.job(id) {
		if j.Status == "failed" || time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want completed: %+v", id, j.Status, j.Steps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("200 MB step ran and was stored in %v", time.Since(began).Round(time.Millisecond))

	const limit = 100 << 20
	bytesOf, first, server := storedLog(t, f.srv.cfg.LogStorage.LocalDir, id)
	if bytesOf["big"] > limit || bytesOf["big"] < limit-(64<<10) {
		t.Errorf("step big stored %d bytes, want just under the %d limit", bytesOf["big"], limit)
	}
	if bytesOf["after"] == 0 {
		t.Errorf("step after stored nothing: the cap is per step")
	}
	var warnings []string
	for _, l := range server {
		if strings.Contains(l, "step_log") {
			warnings = append(warnings, l)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], `"big"`) || !strings.Contains(warnings[0], "step_log limit of 100MB") {
		t.Fatalf("_server warnings about the cap = %q, want one naming step big and 100MB", warnings)
	}
	if first[warnings[0]] > first["after"] {
		t.Errorf("the warning is line %d, after the next step's first line %d: it belongs at the end of step big", first[warnings[0]], first["after"])
	}
	m := regexp.MustCompile(`: (\d+) bytes kept, (\d+) bytes in (\d+) lines dropped`).FindStringSubmatch(warnings[0])
	if m == nil || m[1] != strconv.FormatInt(bytesOf["big"], 10) || m[2] == "0" || m[3] == "0" {
		t.Errorf("warning %q, want the %d bytes kept and what was dropped", warnings[0], bytesOf["big"])
	}
	t.Logf("stored %d bytes of step big; warning: %s", bytesOf["big"], warnings)

	// The last lines of the big log come back without reading it all.
	var tail struct {
		Logs  string `json:"logs"`
		Lines int    `json:"lines"`
		Next  int    `json:"next"`
	}
	if code := do(t, "GET", f.url+"/api/jobs/"+id+"/steps/big/logs?tail=2", nil, &tail); code != 200 {
		t.Fatalf("tail: %d", code)
	}
	if tail.Lines != 2 || tail.Next < 90000 || strings.Count(tail.Logs, "\n") != 2 || !strings.Contains(tail.Logs, strings.Repeat("x", 999)) {
		t.Errorf("tail=2 of step big = %d lines, next %d, %.200q", tail.Lines, tail.Next, tail.Logs)
	}
}

// TestLineOverTheLogLineLimitIsCutWithAMarker prints a 5000-byte line
// under a 1KB log_line limit.
func TestLineOverTheLogLineLimitIsCutWithAMarker(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, floodWorkspace)
	f := startFixture(t, map[string]string{"main": ws}, 1, func(c *config.Server) { c.Effective.Limits.LogLine = 1 << 10 })
	id := f.execute("main", "wide", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job %s: %s", id, j.Status)
	}
	var lines []string
	for _, raw := range strings.Split(strings.TrimSpace(f.logs(id, "long")), "\n") {
		var l struct{ Line string }
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l.Line)
	}
	want := []string{strings.Repeat("w", 1024) + "… [line cut at 1KB limit, 3976 bytes dropped]", "short"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines of step long = %.120q, want %.120q", lines, want)
	}
}
