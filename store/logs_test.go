package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// The behaviour every log backend shares is checked by the logtest suite
// (TestLogFilesPassTheLogSuite); the tests here check what only the files
// do: legacy .log files, open file descriptors, paths on disk.

func openLogs(t *testing.T) *Logs {
	t.Helper()
	l, err := OpenLogs(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatalf("OpenLogs: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func line(step, text string) engine.LogLine {
	return engine.LogLine{TS: t0, Stream: "stdout", Step: step, Line: text}
}

func appendLines(t *testing.T, l *Logs, jobID string, lines ...engine.LogLine) {
	t.Helper()
	if err := l.Append(jobID, lines); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

func TestReadFallsBackToTheLegacyLogFile(t *testing.T) {
	l := openLogs(t)
	legacy := `{"ts":"2024-01-01T00:00:00Z","stream":"stdout","step":"a","line":"one"}
{"ts":"2024-01-01T00:00:01Z","stream":"stdout","step":"b","line":"two"}
`
	if err := os.WriteFile(filepath.Join(l.Dir(), "old.log"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Read("old", ""); err != nil || got != legacy {
		t.Errorf("Read(old) = %q, %v; want the legacy file", got, err)
	}
	if got, err := l.Read("old", "b"); err != nil || got != strings.SplitAfter(legacy, "\n")[1] {
		t.Errorf("Read(old, b) = %q, %v; want its step b line", got, err)
	}
	// Once a JSONL file exists it wins.
	appendLines(t, l, "old", line("c", "new"))
	if got, _ := l.Read("old", ""); strings.Contains(got, "one") || !strings.Contains(got, "new") {
		t.Errorf("Read(old) after append = %q; want the JSONL file only", got)
	}
}

// Lines of finished jobs are written without keeping their files open or
// their entries in memory.
func TestLinesAfterFinishHoldNothingOpen(t *testing.T) {
	l := openLogs(t)
	appendLines(t, l, "j", line("a", "before"))
	l.Finish("j")
	before := openFDs(t)
	for i := 0; i < 50; i++ {
		appendLines(t, l, fmt.Sprintf("late-%d", i), line("a", "late"))
	}
	appendLines(t, l, "j", line("a", "after"))
	if after := openFDs(t); after > before {
		t.Errorf("%d file descriptors open after late appends, %d before", after, before)
	}
	l.mu.Lock()
	live := len(l.jobs)
	l.mu.Unlock()
	if live != 0 {
		t.Errorf("%d job logs still held with nobody watching", live)
	}
}

// A viewer that leaves a job nobody wrote to leaves no entry behind.
func TestCancelForgetsAnUnwrittenJob(t *testing.T) {
	l := openLogs(t)
	backfill, _, cancel, err := l.Subscribe("quiet", engine.LogQuery{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	backfill.Close()
	cancel()
	l.mu.Lock()
	left := len(l.jobs)
	l.mu.Unlock()
	if left != 0 {
		t.Errorf("%d job entries left after the only viewer cancelled", left)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd to count open files:", err)
	}
	return len(fds)
}

// The suite checks that unsafe job IDs are refused; here, that none of
// them made a file anywhere, inside the log directory or next to it.
func TestUnsafeJobIDsWriteNoFile(t *testing.T) {
	l := openLogs(t)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "x\x00y", "a..b", strings.Repeat("x", 300)} {
		if err := l.Append(id, []engine.LogLine{line("s", "x")}); err == nil {
			t.Errorf("Append(%q) succeeded", id)
		}
		if _, _, _, err := l.Subscribe(id, engine.LogQuery{}); err == nil {
			t.Errorf("Subscribe(%q) succeeded", id)
		}
	}
	if entries, err := os.ReadDir(filepath.Dir(l.Dir())); err != nil || len(entries) != 1 {
		t.Errorf("files next to the log dir: %v (%v); want only the log dir", entries, err)
	}
	if entries, err := os.ReadDir(l.Dir()); err != nil || len(entries) != 0 {
		t.Errorf("files in the log dir: %v (%v); want none", entries, err)
	}
}
