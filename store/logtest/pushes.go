package logtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
	"github.com/appliance-sh/appliance/store/dump"
)

// pushed returns the lines "<step> <seq>" numbered from..to, as a worker
// numbers a step run's lines.
func pushed(step string, from, to int64) []engine.LogLine {
	var lines []engine.LogLine
	for seq := from; seq <= to; seq++ {
		l := line(step, fmt.Sprintf("%s %d", step, seq))
		l.Seq = seq
		lines = append(lines, l)
	}
	return lines
}

func appendRun(t *testing.T, l store.LogBackend, jobID, step, run string, lines ...engine.LogLine) {
	t.Helper()
	if err := l.AppendRun(jobID, step, run, lines); err != nil {
		t.Fatalf("AppendRun(%s, %s): %v", step, run, err)
	}
}

// stepTexts returns the text of the step's lines in the job's log.
func stepTexts(t *testing.T, l store.LogBackend, jobID, step string) []string {
	t.Helper()
	lines, _ := decode(t, read(t, l, jobID, step))
	var out []string
	for _, ln := range lines {
		out = append(out, ln.Line)
	}
	return out
}

func checkTexts(t *testing.T, l store.LogBackend, jobID, step string, want ...string) {
	t.Helper()
	if got := stepTexts(t, l, jobID, step); !slices.Equal(got, want) {
		t.Fatalf("lines of %s:\n got  %q\n want %q", step, got, want)
	}
}

// A push repeated because its answer was lost, to the same server or to
// one restarted after it stored the push, appends only the lines the log
// lacks; unnumbered lines are always appended, and a new run of the step
// numbers afresh.
func testRepeatedPushAfterRestart(t *testing.T, cfg Config) {
	s := cfg.New(t)
	l := s.Open(t)
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 3)...)
	appendRun(t, l, "j1", "other", "run-9", pushed("other", 1, 2)...)
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 3)...) // the same server
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3")
	l.Close()

	l = s.Open(t) // a restart: the answer to the push was lost with the server
	unnumbered := line("work", "unnumbered")
	appendRun(t, l, "j1", "work", "run-1", append(pushed("work", 1, 5), unnumbered)...)
	appendRun(t, l, "j1", "other", "run-9", pushed("other", 2, 3)...)
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4", "work 5", "unnumbered")
	checkTexts(t, l, "j1", "other", "other 1", "other 2", "other 3")
	if err := l.EndStep("j1", "work"); err != nil {
		t.Fatal(err)
	}
	appendRun(t, l, "j1", "work", "run-2", pushed("work", 1, 2)...) // a retry numbers afresh
	l.Close()

	l = s.Open(t)
	appendRun(t, l, "j1", "work", "run-2", pushed("work", 1, 3)...)
	appendRun(t, l, "j1", "work", "", pushed("work", 1, 1)...) // no run: always appended
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4", "work 5", "unnumbered",
		"work 1", "work 2", "work 3", "work 1")
	checkTexts(t, l, "j1", "other", "other 1", "other 2", "other 3")

	// Nothing new in a push is no write at all: the log keeps its lines.
	before := read(t, l, "j1", "")
	appendRun(t, l, "j1", "work", "run-2", pushed("work", 2, 3)...)
	if after := read(t, l, "j1", ""); after != before {
		t.Fatalf("a push of lines the log has changed it:\n%s\nthen\n%s", before, after)
	}
}

// A run the server ended (a cancel, a timeout) may still push: its
// worker sends the lines it printed until it was killed, and repeats a
// push whose answer was lost. The run's mark outlives the run's end, the
// job's end and a restart, so a repeat appends only the lines the log
// lacks; a new run of the step still numbers afresh.
func testRepeatedPushAfterTheRunEnded(t *testing.T, cfg Config) {
	s := cfg.New(t)
	l := s.Open(t)
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 3)...)
	if err := l.EndStep("j1", "work"); err != nil { // cancelled as the push was answered
		t.Fatal(err)
	}
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 3)...) // the answer was lost
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 4)...) // its last words
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4")

	l.Finish("j1") // the job ended with the step
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 3, 5)...)
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4", "work 5")
	l.Close()

	l = s.Open(t) // a restart
	// What an export reads, from the medium: the ended run's mark.
	if marks, err := l.RunMarks("j1"); err != nil || len(marks) != 1 || marks[0] != (dump.Mark{JobID: "j1", Step: "work", Run: "run-1", Seq: 5}) {
		t.Fatalf("RunMarks after a restart: %v, %v; want work's run-1 at 5", marks, err)
	}
	appendRun(t, l, "j1", "work", "run-1", pushed("work", 1, 5)...)
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4", "work 5")
	appendRun(t, l, "j1", "work", "run-2", pushed("work", 1, 1)...) // a retry numbers afresh
	if err := l.EndStep("j1", "work"); err != nil {
		t.Fatal(err)
	}
	appendRun(t, l, "j1", "work", "run-2", pushed("work", 1, 1)...)
	checkTexts(t, l, "j1", "work", "work 1", "work 2", "work 3", "work 4", "work 5", "work 1")
}
