package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRetryScheduledBeforeKillNineHappensAfterRestart fails a step's first
// attempt, kills the server with SIGKILL while the retry waits, and checks
// the restarted server runs the second attempt, which completes the job.
func TestRetryScheduledBeforeKillNineHappensAfterRestart(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "first-attempt-ran")
	p := startBinaryServer(t, fmt.Sprintf(`tasks:
  flaky:
    flow:
      try:
        type: script
        retries: 2
        retry_delay: 3s
        script: |
          if [ -f %q ]; then echo "second attempt"; else touch %q; echo "first attempt fails" >&2; exit 3; fi
`, mark, mark), 1)
	f := &serverFixture{t: t, url: "http://" + p.addr}

	id := f.execute("ws", "flaky", nil)
	j := f.waitJob(id, "the first attempt to fail and wait", func(j jobView) bool {
		s := j.step("try")
		return s.Status == "pending" && s.RetryAt != nil
	})
	s := j.step("try")
	if s.Attempt != 1 || s.ErrorMessage == nil || !strings.HasPrefix(*s.ErrorMessage, "Exit code: 3") {
		t.Fatalf("waiting step: attempt %d error %v", s.Attempt, s.ErrorMessage)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()

	p.restart()
	j = f.waitTerminal(id)
	s = j.step("try")
	if j.Status != "completed" || s.Status != "completed" || s.Attempt != 2 || s.RetryAt != nil {
		t.Fatalf("after restart: job %s, step %s attempt %d retry_at %v; want completed on attempt 2", j.Status, s.Status, s.Attempt, s.RetryAt)
	}
	// With no log_storage in the config, the job's log lives under data_dir.
	if _, err := os.Stat(filepath.Join(p.args[1], "logs", id+".jsonl")); err != nil {
		t.Errorf("job log not under data_dir/logs: %v", err)
	}
	logs := f.logs(id, "")
	for _, want := range []string{"first attempt fails", "attempt 2 of 3 after: Exit code: 3", "second attempt"} {
		if !strings.Contains(logs, want) {
			t.Errorf("job log lacks %q:\n%s", want, logs)
		}
	}
}
