package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
)

// numberedFlood's step big prints 200 MB as 200,000 numbered lines of
// 1000 bytes ("000000001 xxx…"), faster than any worker delivers them.
const numberedFlood = `tasks:
  flood:
    flow:
      big:
        type: script
        script: seq -f "%09.0f $(head -c 990 /dev/zero | tr '\0' x)" 1 200000
      after:
        depends_on: [big]
        type: script
        script: echo still here
`

// floodStepLog is the step_log limit of the flood tests (the default):
// half of what the step prints, so the cap trips, and far above the
// worker's buffer, so the step is held back many times before it does.
const floodStepLog = 100 << 20

// waitCompleted waits, longer than waitJob, for a job that moves a lot of
// log to complete.
func waitCompleted(t *testing.T, f *serverFixture, id string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for j := f.job(id); j.Status != "completed"; j = f.job(id) {
		if j.Status == "failed" || j.Status == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want completed: %+v", id, j.Status, j.Steps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkNumberedUpToTheCap reads the job's stored log: step big must hold
// lines 1, 2, 3… with no gap and nothing between them, up to the step_log
// cap; the only notice of lost lines is the cap's own _server warning.
func checkNumberedUpToTheCap(t *testing.T, logDir, jobID string, capBytes int64) {
	t.Helper()
	var (
		next     = 1
		stored   int64
		warnings []string
	)
	eachStoredLine(t, logDir, jobID, func(_ int, raw []byte, step, line string) {
		if strings.Contains(line, "dropped") || strings.Contains(line, "[appliance worker") {
			warnings = append(warnings, step+": "+line)
		}
		if step != "big" {
			return
		}
		stored += int64(len(line)) + 1 // printed: the step_log unit
		num, _, _ := strings.Cut(line, " ")
		if n, err := strconv.Atoi(num); err != nil || n != next || len(line) != 1000 {
			t.Fatalf("step big's stored line %d is %.40q…, want line %d: a line was lost or reordered", next, line, next)
		}
		next++
	})
	kept := next - 1
	t.Logf("step big: lines 1..%d stored in order, %d bytes", kept, stored)
	if stored > capBytes || stored < capBytes-(64<<10) {
		t.Errorf("step big stored %d bytes, want every line up to the %d-byte cap", stored, capBytes)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "_server: ") || !strings.Contains(warnings[0], "step_log limit") ||
		!strings.Contains(warnings[0], strconv.Itoa(200_000-kept)+" lines dropped") {
		t.Fatalf("notices of lost lines %q, want only the step_log cap's, counting the %d lines past it", warnings, 200_000-kept)
	}
}

// TestFloodWithInProcessWorkersKeepsEveryLineUpToTheCap prints 200 MB
// through an in-process worker whose buffer holds 1 MB: the step is held
// back instead of losing lines, and its log is whole up to the cap.
func TestFloodWithInProcessWorkersKeepsEveryLineUpToTheCap(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 200 MB; skipped with -short")
	}
	ws := t.TempDir()
	writeWorkspace(t, ws, numberedFlood)
	f := startFixture(t, map[string]string{"main": ws}, 1, func(c *config.Server) {
		c.Effective.Limits.StepLog = floodStepLog
		c.Test.LogBuffer = 1 << 20
	})
	began := time.Now()
	id := f.execute("main", "flood", nil)
	waitCompleted(t, f, id)
	t.Logf("200 MB step ran and was stored in %v", time.Since(began).Round(time.Millisecond))
	checkNumberedUpToTheCap(t, f.srv.cfg.LogStorage.LocalDir, id, floodStepLog)
}

// TestFloodWithARemoteWorkerKeepsEveryLineUpToTheCap prints 200 MB
// through an `appliance worker` process whose spool holds 2 MB.
func TestFloodWithARemoteWorkerKeepsEveryLineUpToTheCap(t *testing.T) {
	if testing.Short() {
		t.Skip("prints 200 MB; skipped with -short")
	}
	f, _ := remoteFixture(t, numberedFlood, func(c *config.Server) { c.Effective.Limits.StepLog = floodStepLog })
	w := startWorkerProcess(t, f.url, workerToken, "flood-1", "spool_max: 2MB\n")
	f.worker("flood-1")
	began := time.Now()
	id := f.execute("main", "flood", nil)
	waitCompleted(t, f, id)
	t.Logf("200 MB step ran and was stored in %v", time.Since(began).Round(time.Millisecond))
	checkNumberedUpToTheCap(t, f.srv.cfg.LogStorage.LocalDir, id, floodStepLog)
	if s := w.stderr.String(); strings.Contains(s, "dropping") {
		t.Errorf("the worker dropped lines:\n%s", s)
	}
}
