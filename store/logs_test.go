package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

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

func TestAppendWritesOneJSONObjectPerLineAndReadFiltersBySteps(t *testing.T) {
	l := openLogs(t)
	paris := time.FixedZone("CET", 3600)
	appendLines(t, l, "j1",
		engine.LogLine{TS: time.Date(2025, 3, 1, 13, 0, 0, 123456789, paris), Stream: "stdout", Step: "build", Line: "compiling <main> & co"},
		engine.LogLine{TS: t0, Stream: "stderr", Step: "test", Line: "multi\nline"},
	)
	appendLines(t, l, "j1", engine.LogLine{TS: t0, Stream: "stderr", Step: engine.ServerStep, Line: "hook failed"})

	all, err := l.Read("j1", "")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := `{"ts":"2025-03-01T12:00:00.123456789Z","stream":"stdout","step":"build","line":"compiling <main> & co"}
{"ts":"2025-03-01T12:00:00Z","stream":"stderr","step":"test","line":"multi\nline"}
{"ts":"2025-03-01T12:00:00Z","stream":"stderr","step":"_server","line":"hook failed"}
`
	if all != want {
		t.Errorf("log file:\n%s\nwant:\n%s", all, want)
	}
	tests := []struct{ step, want string }{
		{"build", strings.SplitAfter(want, "\n")[0]},
		{"test", strings.SplitAfter(want, "\n")[1]},
		{engine.ServerStep, strings.SplitAfter(want, "\n")[2]},
		{"deploy", ""},
	}
	for _, tt := range tests {
		got, err := l.Read("j1", tt.step)
		if err != nil || got != tt.want {
			t.Errorf("Read(j1, %q) = %q, %v; want %q", tt.step, got, err, tt.want)
		}
	}
}

func TestReadOfAJobWithoutLogIsEmpty(t *testing.T) {
	l := openLogs(t)
	got, err := l.Read("never-ran", "")
	if err != nil || got != "" {
		t.Errorf("Read = %q, %v; want empty", got, err)
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

func TestConcurrentAppendsToOneJobKeepLinesIntact(t *testing.T) {
	l := openLogs(t)
	const writers, appends = 16, 100
	// Long lines make a torn write visible as a line that does not decode.
	payload := strings.Repeat("x", 4000)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				err := l.Append("j", []engine.LogLine{
					line(fmt.Sprintf("w%d", w), fmt.Sprintf("%d a %s", i, payload)),
					line(fmt.Sprintf("w%d", w), fmt.Sprintf("%d b %s", i, payload)),
				})
				if err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()

	data, err := l.Read("j", "")
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSuffix(data, "\n"), "\n")
	for i, raw := range lines {
		var ll wireLine
		if err := json.Unmarshal([]byte(raw), &ll); err != nil {
			t.Fatalf("line %d does not decode (%v): %.80q", i, err, raw)
		}
		seen[ll.Step+" "+strings.TrimSuffix(ll.Line, " "+payload)] = true
		// One Append call is one chunk: its two lines stay adjacent.
		if strings.Contains(ll.Line, " a ") {
			next := lines[i+1]
			if !strings.Contains(next, fmt.Sprintf(`"step":%q`, ll.Step)) || !strings.Contains(next, strings.Fields(ll.Line)[0]+" b ") {
				t.Fatalf("line %d of a chunk is not followed by its pair: %.80q", i, next)
			}
		}
	}
	if len(lines) != writers*appends*2 || len(seen) != writers*appends*2 {
		t.Errorf("got %d lines (%d distinct), want %d", len(lines), len(seen), writers*appends*2)
	}
}

func TestLinesAfterFinishAreWrittenAndHoldNothingOpen(t *testing.T) {
	l := openLogs(t)
	appendLines(t, l, "j", line("a", "before"))
	l.Finish("j")
	l.Finish("j") // idempotent
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
	got, err := l.Read("j", "a")
	if err != nil || strings.Count(got, "\n") != 2 || !strings.Contains(got, "after") {
		t.Errorf("Read = %q, %v; want both lines", got, err)
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

func TestUnsafeJobIDsAreRejected(t *testing.T) {
	l := openLogs(t)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "x\x00y", "a..b", strings.Repeat("x", 300)} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			if err := l.Append(id, []engine.LogLine{line("s", "x")}); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Append error = %v, want ErrInvalid", err)
			}
			if _, err := l.Read(id, ""); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Read error = %v, want ErrInvalid", err)
			}
			if _, _, _, err := l.Subscribe(id, engine.LogQuery{}); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Subscribe error = %v, want ErrInvalid", err)
			}
		})
	}
	entries, err := os.ReadDir(filepath.Dir(l.Dir()))
	if err != nil || len(entries) != 1 {
		t.Errorf("files next to the log dir: %v (%v); want only the log dir", entries, err)
	}
}
