package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/app/config"
	"github.com/appliance-sh/appliance/store"
)

func TestRetentionSweepsEndedJobsOfARunningServer(t *testing.T) {
	retentionSweepsEndedJobs(t)
}

func retentionSweepsEndedJobs(t *testing.T, storage ...func(*config.Server)) {
	dir := t.TempDir()
	writeWorkspace(t, dir, approvalWorkspace)
	f := startFixture(t, map[string]string{"examples": "../../examples", "ws": dir}, 2, append(storage, func(c *config.Server) {
		c.Effective.Retention = store.Retention{Jobs: 4 * time.Second}
		c.Test.SweepInterval = 100 * time.Millisecond
	})...)
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
	// The log store's own copy: a file beside bbolt, rows in PostgreSQL.
	stored := func() bool {
		_, ok, err := f.srv.logs.Stored(ended)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !stored() {
		t.Fatal("the ended job has no stored log")
	}

	waitUntil(t, "the ended job to be swept", func() bool {
		return do(t, "GET", f.url+"/api/jobs/"+ended, nil, nil) == 404
	})
	if got := total(); got != 1 {
		t.Errorf("total after the sweep = %d, want 1", got)
	}
	// The sweep removes a job's log right after its records' commit.
	waitUntil(t, "the swept job's log to be removed", func() bool { return !stored() })
	// The live job, older than the retention, stays and still runs.
	if j := f.job(live); j.Status != "running" && j.Status != "pending" {
		t.Errorf("live job: %s", j.Status)
	}
	if code := do(t, "POST", f.url+"/api/jobs/"+live+"/steps/ask/approve", map[string]any{"approved": true}, nil); code != 200 {
		t.Errorf("approve the live job after a sweep: %d", code)
	}
	f.waitTerminal(live)
}

// TestLogRetentionKeepsALogTheArchiveRefused runs a server whose local-dir
// archive refuses uploads (a file stands where its prefix directory goes):
// retention.logs keeps the job's local log, says so in its _server line
// and on /metrics, and deletes it once the archive accepts the upload.
func TestLogRetentionKeepsALogTheArchiveRefused(t *testing.T) {
	ws := t.TempDir()
	writeWorkspace(t, ws, "tasks:\n  hello:\n    flow:\n      greet:\n        type: script\n        script: echo hello archive\n")
	archiveDir := t.TempDir()
	block := filepath.Join(archiveDir, "logs")
	if err := os.WriteFile(block, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var logDir string
	f := startFixture(t, map[string]string{"ws": ws}, 1, func(c *config.Server) {
		c.LogStorage.Archive = &config.Archive{Type: "local", Path: archiveDir, Prefix: "logs/"}
		c.Effective.Retention = store.Retention{Logs: time.Second}
		c.Test.SweepInterval = 100 * time.Millisecond
		logDir = c.LogStorage.LocalDir
	})
	id := f.execute("ws", "hello", nil)
	if j := f.waitTerminal(id); j.Status != "completed" {
		t.Fatalf("job: %s", j.Status)
	}
	logFile := filepath.Join(logDir, id+".jsonl")
	waitUntil(t, "the sweep to say the log is kept", func() bool {
		return strings.Contains(f.logs(id, "_server"), "log retention keeps this local log until the archive holds it")
	})
	waitUntil(t, "appliance_log_archive_pending to count the log", func() bool {
		_, fams := scrape(t, f.url, "")
		return value(fams, "appliance_log_archive_pending") == 1
	})
	if _, err := os.Stat(logFile); err != nil {
		t.Fatalf("the local log is gone while the archive refuses it: %v", err)
	}

	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// A refused upload is retried with a backoff of up to 8 s, or queued
	// again by the sweep once its attempts are spent.
	deadline := time.Now().Add(40 * time.Second)
	for {
		_, err := os.Stat(logFile)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the local log was never deleted after the archive accepted it: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := f.logs(id, ""); !strings.Contains(got, "hello archive") {
		t.Errorf("log served from the archive:\n%s", got)
	}
	// The sweep sets the gauge once it has gone through the logs.
	waitUntil(t, "appliance_log_archive_pending to drop to 0", func() bool {
		_, fams := scrape(t, f.url, "")
		return value(fams, "appliance_log_archive_pending") == 0
	})
}
