package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store"
)

func TestRetentionSweepsEndedJobsOfARunningServer(t *testing.T) {
	dir := t.TempDir()
	writeWorkspace(t, dir, approvalWorkspace)
	var logDir string
	f := startFixture(t, map[string]string{"examples": "../../examples", "ws": dir}, 2, func(c *config.Server) {
		c.Effective.Retention = store.Retention{Jobs: 4 * time.Second}
		c.Test.SweepInterval = 100 * time.Millisecond
		logDir = c.LogStorage.LocalDir
	})
	total := func() int {
		var list struct {
			Total int `json:"total"`
		}
		if code := do(t, "GET", f.url+"/api/jobs", nil, &list); code != 200 {
			t.Fatalf("GET /api/jobs: %d", code)
		}
		return list.Total
	}

	live := f.execute("ws", "release", map[string]any{"version": "2.0"})
	f.waitJob(live, "the approval to wait", func(j jobView) bool { return j.step("ask").Status == "waiting" })
	ended := f.execute("examples", "hello-world", map[string]any{"name": "Ada"})
	if j := f.waitTerminal(ended); j.Status != "completed" {
		t.Fatalf("hello-world: %s", j.Status)
	}
	if got := total(); got != 2 {
		t.Fatalf("total before the sweep = %d, want 2", got)
	}
	logFile := filepath.Join(logDir, ended+".jsonl")
	if _, err := os.Stat(logFile); err != nil {
		t.Fatalf("the ended job has no log file: %v", err)
	}

	waitUntil(t, "the ended job to be swept", func() bool {
		return do(t, "GET", f.url+"/api/jobs/"+ended, nil, nil) == 404
	})
	if got := total(); got != 1 {
		t.Errorf("total after the sweep = %d, want 1", got)
	}
	// The sweep removes a job's log file right after its records' commit.
	waitUntil(t, "the swept job's log file to be removed", func() bool {
		_, err := os.Stat(logFile)
		return os.IsNotExist(err)
	})
	// The live job, older than the retention, stays and still runs.
	if j := f.job(live); j.Status != "running" && j.Status != "pending" {
		t.Errorf("live job: %s", j.Status)
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+live+"/steps/ask/approve", map[string]any{"approved": true}, nil); code != 200 {
		t.Errorf("approve the live job after a sweep: %d", code)
	}
	f.waitTerminal(live)
}
