package logtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

// capWarnings returns the _server lines that name the step_log limit.
func capWarnings(lines []wireLine) []string {
	var out []string
	for _, l := range lines {
		if l.Step == engine.ServerStep && strings.Contains(l.Line, "step_log limit") {
			out = append(out, l.Line)
		}
	}
	return out
}

// numbered appends lines "<prefix> 000".."<prefix> from+n-1" of step, in
// batches of batch.
func numbered(t *testing.T, l store.LogBackend, jobID, step, prefix string, from, n, batch int) {
	t.Helper()
	var lines []engine.LogLine
	for i := from; i < from+n; i++ {
		lines = append(lines, line(step, fmt.Sprintf("%s %03d", prefix, i)))
		if len(lines) == batch {
			appendLines(t, l, jobID, lines...)
			lines = nil
		}
	}
	appendLines(t, l, jobID, lines...)
}

// logLines decodes the job's whole log.
func logLines(t *testing.T, l store.LogBackend, jobID string) ([]wireLine, map[string]int) {
	t.Helper()
	return decode(t, read(t, l, jobID, ""))
}

// checkRun checks that step kept an unbroken first part of its lines
// "out 000".. within the limit, and that the log holds one warning, which
// says how much was kept and dropped.
func checkRun(t *testing.T, l store.LogBackend, jobID, step string, limit, sent int, limitText string) {
	t.Helper()
	lines, bytesOf := logLines(t, l, jobID)
	if bytesOf[step] > limit || bytesOf[step] < limit-10 {
		t.Errorf("step %s stored %d bytes, want at most the %d limit and not much less", step, bytesOf[step], limit)
	}
	kept := 0
	for _, ln := range lines {
		if ln.Step == step {
			if want := fmt.Sprintf("out %03d", kept); ln.Line != want {
				t.Fatalf("kept line %d of %s = %q, want %q: the kept lines must be the first ones", kept, step, ln.Line, want)
			}
			kept++
		}
	}
	perLine := bytesOf[step] / kept // every line encodes to the same size
	want := fmt.Sprintf(`log of step %q cut at the step_log limit of %s: %d bytes kept, %d bytes in %d lines dropped (bytes the step printed, each line with its newline;`,
		step, limitText, bytesOf[step], (sent-kept)*perLine, sent-kept)
	if warns := capWarnings(lines); len(warns) != 1 || !strings.HasPrefix(warns[0], want) {
		t.Errorf("cap warnings = %q, want one starting %q", warns, want)
	}
}

func testStepCap(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	l.SetLimits(store.LogLimits{StepLog: 300})
	numbered(t, l, "j1", "big", "out", 0, 60, 7) // 8 bytes a line: 480, over the limit
	numbered(t, l, "j1", "small", "out", 0, 5, 2)
	appendLines(t, l, "j1", line(engine.ServerStep, strings.Repeat("s", 2000))) // not a step: not counted
	numbered(t, l, "j1", "big", "out", 60, 5, 5)
	if lines, _ := logLines(t, l, "j1"); len(capWarnings(lines)) != 0 {
		t.Fatalf("a warning before the run ended: %q", capWarnings(lines))
	}
	for _, step := range []string{"big", "small"} {
		if err := l.EndStep("j1", step); err != nil {
			t.Fatal(err)
		}
	}
	checkRun(t, l, "j1", "big", 300, 65, "300 bytes")
	if _, bytesOf := logLines(t, l, "j1"); bytesOf["small"] == 0 {
		t.Errorf("small step kept nothing: the limit is per step")
	}

	// A next run of the step (a retry) starts from nothing.
	appendLines(t, l, "j1", line("big", "retry"))
	l.Finish("j1")
	lines, _ := logLines(t, l, "j1")
	if last := lines[len(lines)-1]; last.Step != "big" || last.Line != "retry" || len(capWarnings(lines)) != 1 {
		t.Errorf("after a new run: last line %+v, %d warnings; want the retry's line and still one warning", last, len(capWarnings(lines)))
	}
}

func testStepCapRestart(t *testing.T, cfg Config) {
	s := cfg.New(t)
	reopen := func() store.LogBackend {
		l := s.Open(t)
		l.SetLimits(store.LogLimits{StepLog: 300})
		return l
	}
	l := reopen()
	numbered(t, l, "j1", "big", "out", 0, 10, 3) // under the limit
	l.Close()
	l = reopen() // knows what the log holds before its first append
	numbered(t, l, "j1", "big", "out", 10, 30, 4)
	l.Close()
	l = reopen() // the run is over the limit: its next lines are dropped too
	numbered(t, l, "j1", "big", "out", 40, 10, 1)
	l.Finish("j1") // a run EndStep did not close is closed with the job
	lines, bytesOf := logLines(t, l, "j1")
	warns := capWarnings(lines)
	// The second server dropped 3 lines (37 of 8 bytes fit in 300), the
	// third 10.
	dropped := "in 10 lines dropped"
	if cfg.KeepsDroppedCounts {
		dropped = "in 13 lines dropped"
	}
	if bytesOf["big"] > 300 || bytesOf["big"] < 290 || len(warns) != 1 || !strings.Contains(warns[0], dropped) {
		t.Fatalf("big stored %d bytes; warnings %q; want one saying %q", bytesOf["big"], warns, dropped)
	}
	l.Close()
	l = reopen() // the warning ended that run: a new one may log
	appendLines(t, l, "j1", line("big", "next run"))
	if lines, _ := logLines(t, l, "j1"); lines[len(lines)-1].Line != "next run" {
		t.Errorf("a new run after the restart was dropped")
	}
}

// The limit counts what the step printed, not the JSON stored: lines whose
// stored envelopes go well past it but whose printed bytes do not are all
// kept; one byte more than the limit drops the last line, and the warning
// counts it in printed bytes.
func testStepCapPrintedBytes(t *testing.T, cfg Config) {
	l, s := open(t, cfg)
	l.SetLimits(store.LogLimits{StepLog: 1000})
	text := strings.Repeat("x", 99) // 100 bytes printed with its newline
	for range 10 {
		appendLines(t, l, "j1", line("fits", text))
	}
	for range 11 {
		appendLines(t, l, "j1", line("over", text))
	}
	appendLines(t, l, "j1", line("over", text[:49])) // 50 bytes printed
	for _, step := range []string{"fits", "over"} {
		if err := l.EndStep("j1", step); err != nil {
			t.Fatal(err)
		}
	}
	data := read(t, l, "j1", "")
	lines, bytesOf := decode(t, data)
	if len(data) < 2*1000 {
		t.Fatalf("the log holds %d bytes: the envelopes should take it well past the limit for this test to mean anything", len(data))
	}
	count := map[string]int{}
	for _, ln := range lines {
		count[ln.Step]++
	}
	if count["fits"] != 10 || bytesOf["fits"] != 1000 {
		t.Errorf("step fits kept %d lines, %d bytes; want all 10, 1000 bytes", count["fits"], bytesOf["fits"])
	}
	if count["over"] != 10 || bytesOf["over"] != 1000 {
		t.Errorf("step over kept %d lines, %d bytes; want 10, 1000 bytes", count["over"], bytesOf["over"])
	}
	want := `log of step "over" cut at the step_log limit of 1000 bytes: 1000 bytes kept, 150 bytes in 2 lines dropped (bytes the step printed, each line with its newline; raise limits.step_log in the server config to keep more)`
	if warns := capWarnings(lines); len(warns) != 1 || warns[0] != want {
		t.Errorf("cap warnings = %q, want only %q", warns, want)
	}

	// A restart counts in the same unit: a run that printed exactly the
	// limit has room for nothing more, not even an empty line.
	for range 10 {
		appendLines(t, l, "j2", line("full", text))
	}
	l.Close()
	l2 := s.Open(t)
	l2.SetLimits(store.LogLimits{StepLog: 1000})
	appendLines(t, l2, "j2", line("full", ""))
	if err := l2.EndStep("j2", "full"); err != nil {
		t.Fatal(err)
	}
	lines, _ = logLines(t, l2, "j2")
	want = `log of step "full" cut at the step_log limit of 1000 bytes: 1000 bytes kept, 1 bytes in 1 lines dropped`
	if warns := capWarnings(lines); len(warns) != 1 || !strings.HasPrefix(warns[0], want) {
		t.Errorf("after a restart, cap warnings = %q, want one starting %q", warns, want)
	}
}

func testLongLines(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	l.SetLimits(store.LogLimits{LogLine: 10})
	appendLines(t, l, "j1",
		line("a", "short"),
		line("a", "abcdefghié and more"), // the cut falls inside é
		line(engine.ServerStep, "0123456789abc"),
		line("a", "0123456789"),
	)
	lines, _ := logLines(t, l, "j1")
	want := []string{
		"short",
		"abcdefghi… [line cut at 10 bytes limit, 11 bytes dropped]",
		"0123456789… [line cut at 10 bytes limit, 3 bytes dropped]",
		"0123456789",
	}
	for i, ln := range lines {
		if i < len(want) && ln.Line != want[i] {
			t.Errorf("line %d = %q, want %q", i, ln.Line, want[i])
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}

	// A backend whose limits were never set cuts at the default.
	d, _ := open(t, cfg)
	appendLines(t, d, "j1", line("a", strings.Repeat("x", 70000)))
	lines, _ = logLines(t, d, "j1")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	if got := lines[0].Line; len(got) > 64<<10+100 || !strings.HasSuffix(got, "… [line cut at 64KB limit, 4464 bytes dropped]") {
		t.Errorf("with the default limits, a 70000-byte line is %d bytes ending ...%q; want it cut at 64KB", len(got), got[max(0, len(got)-60):])
	}
}
