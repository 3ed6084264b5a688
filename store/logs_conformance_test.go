package store_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/logtest"
)

// logDir is a log directory: the file backend's storage.
type logDir string

func (d logDir) Open(t *testing.T) store.LogBackend {
	t.Helper()
	l, err := store.OpenLogs(string(d))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func (d logDir) SetWritten(t *testing.T, jobID string, at time.Time) {
	t.Helper()
	if err := os.Chtimes(filepath.Join(string(d), jobID+".jsonl"), at, at); err != nil {
		t.Fatal(err)
	}
}

func TestLogFilesPassTheLogSuite(t *testing.T) {
	logtest.Run(t, logtest.Config{
		New: func(t *testing.T) logtest.Storage { return logDir(filepath.Join(t.TempDir(), "logs")) },
	})
}

// A legacy .log file answers every query like the JSONL file it matches,
// its last line without a newline too.
func TestLegacyLogFileReadsTailAndAfterLikeTheJSONL(t *testing.T) {
	dir := logDir(filepath.Join(t.TempDir(), "logs"))
	l := dir.Open(t)
	logtest.BigMixedLog(t, l, "j1")
	data, err := os.ReadFile(filepath.Join(string(dir), "j1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := strings.TrimSuffix(string(data), "\n")
	if err := os.WriteFile(filepath.Join(string(dir), "j2.log"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	logtest.CheckQueries(t, l, "j2", legacy)
	logtest.CheckBackfills(t, l, "j2", legacy)
}

// A server killed after it wrote a push's mark but before its lines
// reached the file (or with other bytes where they were to go) has not
// stored them: the repeated push after the restart appends them, once.
func TestPushWhoseLinesMissedTheFileIsAppendedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"lines absent", func(*testing.T, string) {}},
		{"other bytes in their place", func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			other := `{"ts":"2025-03-01T12:00:00Z","stream":"stderr","step":"_server","line":"` + strings.Repeat("x", 200) + "\"}\n"
			if _, err := f.WriteString(other); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := logDir(filepath.Join(t.TempDir(), "logs"))
			path := filepath.Join(string(dir), "j1.jsonl")
			l := dir.Open(t)
			push := func(l store.LogBackend, from, to int64) {
				t.Helper()
				var lines []engine.LogLine
				for seq := from; seq <= to; seq++ {
					lines = append(lines, engine.LogLine{Stream: "stdout", Step: "work", Line: fmt.Sprintf("line %d", seq), Seq: seq})
				}
				if err := l.AppendRun("j1", "work", "run-1", lines); err != nil {
					t.Fatal(err)
				}
			}
			push(l, 1, 2)
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			push(l, 3, 4)
			l.Close()
			// The kill: the marks file says lines 3 and 4 are in; they are not.
			if err := os.Truncate(path, info.Size()); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, path)

			l = dir.Open(t)
			push(l, 1, 4)
			var b strings.Builder
			if _, err := l.ReadLog(t.Context(), "j1", engine.LogQuery{Step: "work"}, &b); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, raw := range strings.SplitAfter(b.String(), "\n") {
				var w struct{ Line string }
				if raw != "" && json.Unmarshal([]byte(raw), &w) == nil {
					got = append(got, w.Line)
				}
			}
			if want := []string{"line 1", "line 2", "line 3", "line 4"}; !slices.Equal(got, want) {
				t.Fatalf("lines after the repeated push: %q, want %q", got, want)
			}
		})
	}
}

// The marks file beside a log grows by a record a push and is rewritten
// with each step's last mark once it is big, an ended run's too (it may
// still push); the marks hold across that and a restart.
func TestLogMarksFileStaysSmallAndKeepsTheMarks(t *testing.T) {
	dir := logDir(filepath.Join(t.TempDir(), "logs"))
	l := dir.Open(t)
	push := func(l store.LogBackend, step string, from, to int64) {
		t.Helper()
		var lines []engine.LogLine
		for seq := from; seq <= to; seq++ {
			lines = append(lines, engine.LogLine{Stream: "stdout", Step: step, Line: fmt.Sprintf("%s %d", step, seq), Seq: seq})
		}
		if err := l.AppendRun("j1", step, "run-"+step, lines); err != nil {
			t.Fatal(err)
		}
	}
	const n = 2000
	push(l, "early", 1, 1)
	if err := l.EndStep("j1", "early"); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= n; seq++ {
		push(l, "busy", seq, seq)
	}
	info, err := os.Stat(filepath.Join(string(dir), "j1.marks"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size() > 100<<10 {
		t.Fatalf("the marks file of %d pushes takes %d bytes: it was never rewritten", n+1, info.Size())
	}
	l.Close()

	l = dir.Open(t)
	push(l, "busy", n-1, n+1)
	push(l, "early", 1, 2)
	for step, want := range map[string]int{"busy": n + 1, "early": 2} {
		var b strings.Builder
		if _, err := l.ReadLog(t.Context(), "j1", engine.LogQuery{Step: step}, &b); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(b.String(), "\n"); got != want {
			t.Errorf("step %s has %d lines after the restart, want %d", step, got, want)
		}
	}
	if _, err := l.Remove("j1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(string(dir), "j1.marks")); !os.IsNotExist(err) {
		t.Errorf("the marks of a removed log: %v, want them gone", err)
	}
}
