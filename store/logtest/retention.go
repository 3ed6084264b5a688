package logtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
)

func testRemove(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	appendLines(t, l, "gone", line("a", "one"), line("b", "two"))
	appendLines(t, l, "kept", line("a", "stays"))
	if removed, err := l.Remove("gone"); err != nil || !removed {
		t.Fatalf("Remove = %v, %v; want removed", removed, err)
	}
	if got := read(t, l, "gone", ""); got != "" {
		t.Errorf("log after Remove = %q, want empty", got)
	}
	if _, ok, err := l.Stored("gone"); ok || err != nil {
		t.Errorf("Stored after Remove = %v, %v; want no log", ok, err)
	}
	if removed, err := l.Remove("gone"); err != nil || removed {
		t.Errorf("second Remove = %v, %v; want nothing removed", removed, err)
	}
	if got := read(t, l, "kept", ""); !strings.Contains(got, "stays") {
		t.Errorf("other job's log = %q, want kept", got)
	}
	// A job whose log was removed logs again from its first line.
	appendLines(t, l, "gone", line("a", "again"))
	if got := lineTexts(t, []byte(read(t, l, "gone", ""))); strings.Join(got, ",") != "again" {
		t.Errorf("log after a new append = %v, want [again]", got)
	}
	if got := lineTexts(t, []byte(read(t, l, "gone", "a"))); strings.Join(got, ",") != "again" {
		t.Errorf("step a after a new append = %v, want [again]", got)
	}
}

func testLastWritten(t *testing.T, cfg Config) {
	l, s := open(t, cfg)
	now := time.Now()
	for i, id := range []string{"old1", "old2", "new"} {
		appendLines(t, l, id, line("a", id))
		s.SetWritten(t, id, now.Add(time.Duration(i-2)*48*time.Hour))
	}
	cutoff := now.Add(-24 * time.Hour)
	ids, err := l.LastWrittenBefore(cutoff)
	if err != nil || !slices.Equal(ids, []string{"old1", "old2"}) {
		t.Fatalf("LastWrittenBefore = %v, %v; want [old1 old2]", ids, err)
	}
	// A note about an old log keeps its time; a job without a log gets
	// none.
	note := engine.LogLine{TS: t0, Stream: "stderr", Step: engine.ServerStep, Line: "kept for the archive"}
	if err := l.AppendNote("old1", note); err != nil {
		t.Fatal(err)
	}
	if err := l.AppendNote("nolog", note); err != nil {
		t.Fatal(err)
	}
	if got := read(t, l, "old1", engine.ServerStep); !strings.Contains(got, "kept for the archive") {
		t.Errorf("old1's log = %q; want the note", got)
	}
	if _, ok, _ := l.Stored("nolog"); ok {
		t.Errorf("a note made a log for a job without one")
	}
	if ids, err := l.LastWrittenBefore(cutoff); err != nil || !slices.Equal(ids, []string{"old1", "old2"}) {
		t.Errorf("after the note, LastWrittenBefore = %v, %v; want [old1 old2]", ids, err)
	}
	// A real line restarts it.
	appendLines(t, l, "old2", line("a", "more"))
	if ids, err := l.LastWrittenBefore(cutoff); err != nil || !slices.Equal(ids, []string{"old1"}) {
		t.Errorf("after an append, LastWrittenBefore = %v, %v; want [old1]", ids, err)
	}
}

// Another backend over the same storage (another replica, or the same
// server after a restart) reads what the first wrote, and continues it.
func testSecondReader(t *testing.T, cfg Config) {
	s := cfg.New(t)
	writer, reader := s.Open(t), s.Open(t)
	sent := BigMixedLog(t, writer, "j1")
	text := read(t, writer, "j1", "")
	checkSent(t, text, sent)
	if got := read(t, reader, "j1", ""); got != text {
		t.Fatalf("the second backend reads %d bytes, the writer %d", len(got), len(text))
	}
	CheckQueries(t, reader, "j1", text)
	CheckBackfills(t, reader, "j1", text)
	size, ok, err := reader.Stored("j1")
	if err != nil || !ok || size != int64(len(text)) {
		t.Errorf("Stored on the second backend = %d, %v, %v; want %d", size, ok, err, len(text))
	}
	// The writer moves (a failover): the second continues the log.
	appendLines(t, reader, "j1", line("a", "after the failover"))
	if got := read(t, writer, "j1", "a"); !strings.HasSuffix(got, "\"after the failover\"}\n") {
		t.Errorf("step a's log ends %q; want the new writer's line", got[max(0, len(got)-80):])
	}
	// Lines appended meanwhile appear to a reader's next page.
	var b strings.Builder
	page, err := reader.ReadLog(t.Context(), "j1", engine.LogQuery{After: len(sent)}, &b)
	if err != nil || page.Lines != 1 || page.Next != len(sent)+1 || !strings.Contains(b.String(), "after the failover") {
		t.Errorf("next page = %q, %+v, %v", b.String(), page, err)
	}
}

// A viewer on another replica gets the lines the writer appends and sees
// the stream end when the writer finishes the job.
func testSecondStreamer(t *testing.T, cfg Config) {
	if !cfg.FollowsOtherWriters {
		t.Skip("this backend does not follow other writers: the API forwards streams to the leader")
	}
	s := cfg.New(t)
	writer, viewer := s.Open(t), s.Open(t)
	appendLines(t, writer, "j", line("s", "0"))
	backfill, updates, cancel, err := viewer.Subscribe("j", engine.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	const n = 200
	for i := 1; i < n; i++ {
		appendLines(t, writer, "j", line("s", fmt.Sprint(i)))
	}
	writer.Finish("j")
	got := append(lineTexts(t, readBackfill(t, backfill)), lineTexts(t, drain(t, updates))...)
	if len(got) != n {
		t.Fatalf("the viewer saw %d lines, want %d", len(got), n)
	}
	for i, text := range got {
		if text != fmt.Sprint(i) {
			t.Fatalf("line %d is %q, want %d (gap or duplicate)", i, text, i)
		}
	}
}
