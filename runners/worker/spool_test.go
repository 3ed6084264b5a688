package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/jsonstr"
	"github.com/appliance-sh/appliance/runners"
)

func openTestSpool(t testing.TB, dir string, max int64) (*Spool, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	sp, err := OpenSpool(dir, max, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp, &logs
}

func newTestRun(t testing.TB, sp *Spool) *spoolRun {
	t.Helper()
	r, err := sp.create(runMeta{Run: randomID(), JobID: "job-1", Step: "build", WorkerID: "w-1", Created: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// reopenOne opens the spool at dir again, as the next worker process
// does, and recovers the one run it must hold.
func reopenOne(t *testing.T, dir string) (*Spool, *spoolRun, *bytes.Buffer) {
	t.Helper()
	sp, logs := openTestSpool(t, dir, 0)
	runs := sp.recover()
	if len(runs) != 1 {
		t.Fatalf("recovered %d runs, want 1", len(runs))
	}
	return sp, runs[0], logs
}

// drain reads and acknowledges batches of at most n lines until the result
// comes, and returns every line and the result.
func drain(t *testing.T, j journal, n int) ([]LogLine, *Result) {
	t.Helper()
	var lines []LogLine
	for range 100_000 {
		b, err := j.Pending(n, maxPushBytes)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, b.Lines...)
		if err := j.Ack(b); err != nil {
			t.Fatal(err)
		}
		if b.Result != nil {
			return lines, b.Result
		}
		if len(b.Lines) == 0 {
			return lines, nil
		}
	}
	t.Fatal("delivery does not end")
	return nil, nil
}

// wantNumbered checks lines are "line 1".."line n", numbered 1..n.
// logLines logs "line from" to "line to" on stdout.
func logLines(j journal, from, to int) {
	for i := from; i <= to; i++ {
		j.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d", i))
	}
}

func wantNumbered(t *testing.T, lines []LogLine, from, n int) {
	t.Helper()
	if len(lines) != n-from+1 {
		t.Fatalf("%d lines, want %d (%d..%d)", len(lines), n-from+1, from, n)
	}
	for i, l := range lines {
		want := from + i
		if l.Line != fmt.Sprintf("line %d", want) || l.Seq != int64(want) || l.Stream != runners.Stdout {
			t.Fatalf("line %d is %+v, want %q numbered %d", i, l, fmt.Sprintf("line %d", want), want)
		}
	}
}

func TestSpoolDeliversLinesInOrderThenTheResult(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 0)
	r := newTestRun(t, sp)
	logLines(r, 1, 10)
	b, err := r.Pending(4, maxPushBytes)
	if err != nil || len(b.Lines) != 4 || b.Result != nil {
		t.Fatalf("first batch: %+v %v; want 4 lines and no result", b, err)
	}
	// Not acknowledged (the push failed): the same lines come again.
	again, _ := r.Pending(4, maxPushBytes)
	if len(again.Lines) != 4 || again.Lines[0].Seq != 1 {
		t.Fatalf("a batch not acknowledged is not sent again: %+v", again.Lines)
	}
	if err := r.Ack(b); err != nil {
		t.Fatal(err)
	}
	r.Finish(Result{Output: map[string]any{"n": 10.0}})
	r.Log(context.Background(), runners.Stdout, "after the result") // ignored: nothing follows the result
	lines, res := drain(t, r, 4)
	wantNumbered(t, lines, 5, 10)
	if res == nil || res.Output["n"] != 10.0 {
		t.Fatalf("result %+v", res)
	}
	r.Remove()
	if _, err := os.Stat(r.dir); !os.IsNotExist(err) || sp.used.Load() != 0 {
		t.Fatalf("a delivered run is left: stat %v, %d bytes used", err, sp.used.Load())
	}
}

func TestSpoolRemovesDeliveredSegmentsWhileTheStepRuns(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 0)
	r := newTestRun(t, sp)
	long := strings.Repeat("x", 1000)
	n := 3 * segmentMax / 1000 // three segments and more
	for i := 1; i <= n; i++ {
		r.Log(context.Background(), runners.Stdout, long)
	}
	if got := segmentFiles(t, r.dir); got < 3 {
		t.Fatalf("%d segments after %d bytes of lines", got, n*1000)
	}
	before := sp.used.Load()
	lines, res := drain(t, r, maxPushLines)
	if len(lines) != n || res != nil {
		t.Fatalf("delivered %d lines (result %v), want %d and no result yet", len(lines), res, n)
	}
	if got := segmentFiles(t, r.dir); got != 1 {
		t.Fatalf("%d segments left once every line is delivered, want only the one being written", got)
	}
	if after := sp.used.Load(); after > segmentMax+2000 || after >= before {
		t.Fatalf("spool holds %d bytes after delivery (%d before)", after, before)
	}
}

func segmentFiles(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, ok := segmentNum(e.Name()); ok {
			n++
		}
	}
	return n
}

func TestSpoolRecoversUndeliveredLinesAfterARestart(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	logLines(r, 1, 10)
	b, _ := r.Pending(6, maxPushBytes)
	if err := r.Ack(b); err != nil {
		t.Fatal(err)
	}
	// The worker process ends here, mid-step.
	sp.Close()

	sp2, got, _ := reopenOne(t, dir)
	if got.meta != r.meta {
		t.Fatalf("recovered run %+v, want %+v", got.meta, r.meta)
	}
	got.Log(context.Background(), runners.Stdout, "line 11") // numbering goes on
	got.Finish(runners.Failed(runners.ExitKilled, "lost"))
	lines, res := drain(t, got, 3)
	wantNumbered(t, lines, 7, 11)
	if res == nil || errText(*res) != "lost" {
		t.Fatalf("result %+v", res)
	}
	got.Remove()

	sp2.Close()
	sp3, _ := openTestSpool(t, dir, 0)
	if runs := sp3.recover(); len(runs) != 0 || sp3.used.Load() != 0 {
		t.Fatalf("a delivered run came back: %d runs, %d bytes", len(runs), sp3.used.Load())
	}
}

func TestSpoolKeepsAFinishedRunsResultAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	r.Log(context.Background(), runners.Stdout, "line 1")
	r.Finish(Result{Output: map[string]any{"ok": true}})
	sp.Close()

	_, got, _ := reopenOne(t, dir)
	got.Finish(runners.Failed(1, "must not replace the result"))
	lines, res := drain(t, got, 10)
	wantNumbered(t, lines, 1, 1)
	if res == nil || res.Error != nil || res.Output["ok"] != true {
		t.Fatalf("result %+v", res)
	}
}

func TestSpoolCutsAHalfWrittenRecordAndSkipsACorruptOne(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	logLines(r, 1, 3)
	r.Flush() // as the step's output reader does once it read all there was
	sp.Close()
	seg := segmentPath(r.dir, 1)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A record that does not decode, then one cut short by a crash.
	if _, err := f.WriteString("{not json}\n" + `{"seq":4,"ts":"2026-01-01T00:00:00Z","stream":"stdout","li`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	_, got, logs := reopenOne(t, dir)
	got.Log(context.Background(), runners.Stdout, "line 4")
	got.Finish(Result{})
	lines, res := drain(t, got, 100)
	wantNumbered(t, lines, 1, 4)
	if res == nil {
		t.Fatal("no result")
	}
	for _, want := range []string{"cutting off a record left half-written", "skipped records that do not decode"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("worker log lacks %q:\n%s", want, logs)
		}
	}
	if raw, _ := os.ReadFile(seg); bytes.Contains(raw, []byte(`"li`+"\n")) || !bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatalf("the half-written record is still in the segment:\n%s", raw)
	}
}

func TestSpoolRefusesASecondWorkerProcess(t *testing.T) {
	dir := t.TempDir()
	openTestSpool(t, dir, 0)
	_, err := OpenSpool(dir, 0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "in use by another worker process") {
		t.Fatalf("second open of a spool: %v", err)
	}
}

func TestSpoolDropsAnUnreadableRun(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "junk"), 0o700); err != nil {
		t.Fatal(err)
	}
	sp, logs := openTestSpool(t, dir, 0)
	if runs := sp.recover(); len(runs) != 0 {
		t.Fatalf("recovered %d runs from junk", len(runs))
	}
	if _, err := os.Stat(filepath.Join(dir, "junk")); !os.IsNotExist(err) || !strings.Contains(logs.String(), "dropping an unreadable step run") {
		t.Fatalf("junk run dir: stat %v; log:\n%s", err, logs)
	}
}

// BenchmarkSpoolLog measures appending 100-byte lines to the spool.
func BenchmarkSpoolLog(b *testing.B) {
	sp, _ := openTestSpool(b, b.TempDir(), 1<<40)
	r := newTestRun(b, sp)
	line := strings.Repeat("x", 100)
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for range b.N {
		r.Log(context.Background(), runners.Stdout, line)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkSpoolDeliver measures reading back and acknowledging spooled
// lines in push-sized batches.
func BenchmarkSpoolDeliver(b *testing.B) {
	sp, _ := openTestSpool(b, b.TempDir(), 1<<40)
	r := newTestRun(b, sp)
	line := strings.Repeat("x", 100)
	for range b.N {
		r.Log(context.Background(), runners.Stdout, line)
	}
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	n := 0
	for n < b.N {
		bt, err := r.Pending(maxPushLines, maxPushBytes)
		if err != nil || len(bt.Lines) == 0 {
			b.Fatalf("pending: %d lines, %v", len(bt.Lines), err)
		}
		n += len(bt.Lines)
		if err := r.Ack(bt); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// TestSpoolRunWithoutLinesLivesInTheRunsLog: a step that prints nothing
// gets no directory; its beginning and result are in the runs log, which a
// restart recovers, and which is emptied once every run is delivered.
func TestSpoolRunWithoutLinesLivesInTheRunsLog(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	quiet := newTestRun(t, sp)
	unfinished := newTestRun(t, sp)
	quiet.Finish(Result{Output: map[string]any{"ok": true}})
	if err := quiet.Persist(); err != nil {
		t.Fatal(err)
	}
	if n := spooledRuns(t, sp); n != 0 {
		t.Fatalf("%d run directories for runs without lines, want none", n)
	}
	sp.Close()

	sp2, _ := openTestSpool(t, dir, 0)
	runs := sp2.recover()
	if len(runs) != 2 {
		t.Fatalf("recovered %d runs, want 2", len(runs))
	}
	byRun := map[string]*spoolRun{runs[0].meta.Run: runs[0], runs[1].meta.Run: runs[1]}
	if r := byRun[quiet.meta.Run]; r == nil || r.res == nil || r.res.Output["ok"] != true {
		t.Fatalf("the finished run came back as %+v", r)
	}
	if r := byRun[unfinished.meta.Run]; r == nil || r.res != nil || r.meta.WorkerID != "w-1" {
		t.Fatalf("the unfinished run came back as %+v", r)
	}
	for _, r := range runs {
		r.Finish(Result{})
		r.Remove()
	}
	if info, err := os.Stat(filepath.Join(dir, runsFile)); err != nil || info.Size() != 0 {
		t.Fatalf("runs log once every run is delivered: %v, %v; want empty", info, err)
	}
	if runs := sp2.recover(); len(runs) != 0 {
		t.Fatalf("recovered %d delivered runs", len(runs))
	}
}

// TestSpoolRunsLogStaysSmallWhileARunLivesOn: runs coming and going beside
// one that stays do not grow the runs log past its compaction size, and the
// one that stays is still recovered.
func TestSpoolRunsLogStaysSmallWhileARunLivesOn(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	stays := newTestRun(t, sp)
	for range 30_000 {
		r := newTestRun(t, sp)
		r.Finish(Result{})
		r.Remove()
	}
	if info, err := os.Stat(filepath.Join(dir, runsFile)); err != nil || info.Size() > runsCompactAt {
		t.Fatalf("runs log: %v, %v; want at most %d bytes", info.Size(), err, runsCompactAt)
	}
	sp.Close()
	_, got, _ := reopenOne(t, dir)
	if got.meta.Run != stays.meta.Run {
		t.Fatalf("recovered run %s, want %s", got.meta.Run, stays.meta.Run)
	}
}

// TestSpoolRunGetsADirectoryWithItsFirstLine: a run that prints keeps its
// lines and result in a directory of its own, as before the runs log.
func TestSpoolRunGetsADirectoryWithItsFirstLine(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	r.Log(context.Background(), runners.Stdout, "line 1")
	r.Finish(Result{})
	if _, err := os.Stat(filepath.Join(r.dir, runFile)); err != nil {
		t.Fatalf("run with a line has no directory: %v", err)
	}
	sp.Close()
	_, got, _ := reopenOne(t, dir)
	lines, res := drain(t, got, 10)
	wantNumbered(t, lines, 1, 1)
	if res == nil {
		t.Fatal("no result")
	}
}

// TestSpoolDeliversFromMemoryAndFromDiskAlike: lines delivered while they
// are still in memory and lines read back once delivery fell behind (more
// undelivered than a run keeps in memory) come out the same, in order,
// each once, and free the same room.
func TestSpoolDeliversFromMemoryAndFromDiskAlike(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 0)
	r := newTestRun(t, sp)
	long := strings.Repeat("x", 1000)
	var got []LogLine
	seq := 0
	write := func(n int) {
		for range n {
			seq++
			r.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d %s", seq, long))
		}
	}
	take := func(max int) {
		b, err := r.Pending(max, maxPushBytes)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Lines...)
		if err := r.Ack(b); err != nil {
			t.Fatal(err)
		}
	}
	write(10)
	take(4) // from memory
	take(100)
	write(2 * maxRecentBytes / 1000) // more than memory holds: delivery reads the spool
	for len(got) < seq {
		take(700)
	}
	write(5) // caught up: from memory again
	if len(r.recent) != 5 {
		t.Fatalf("%d lines in memory after delivery caught up, want 5", len(r.recent))
	}
	r.Finish(Result{})
	lines, res := drain(t, r, 3)
	got = append(got, lines...)
	if res == nil || len(got) != seq {
		t.Fatalf("delivered %d lines (result %v), want %d and the result", len(got), res, seq)
	}
	for i, l := range got {
		if l.Seq != int64(i+1) || !strings.HasPrefix(l.Line, fmt.Sprintf("line %d ", i+1)) {
			t.Fatalf("line %d is %d %.20q", i+1, l.Seq, l.Line)
		}
	}
	r.Remove()
	if sp.used.Load() != 0 {
		t.Fatalf("%d bytes still counted once the run is delivered", sp.used.Load())
	}
}

// TestSpoolLineRecordsReadAsEncodingJSONReadsThem: the hand-written
// records of log lines decode, by hand or by encoding/json, to what was
// written (bytes that are not UTF-8 as U+FFFD), whatever the line holds.
func TestSpoolLineRecordsReadAsEncodingJSONReadsThem(t *testing.T) {
	ts := time.Date(2026, 11, 27, 16, 10, 0, 123456789, time.UTC)
	for _, line := range []string{"", "plain", `quo"te and back\slash`, "tab\tcr\rnul\x00 \x1f", "<html> & ünïcödé ✓", "OUTPUT: {\"a\": [1, 2]}", "bad \xff byte"} {
		raw := appendLineRecord(nil, new(jsonstr.Times), 42, ts, runners.Stderr, line)
		var byJSON, byHand record
		if err := json.Unmarshal(raw, &byJSON); err != nil {
			t.Fatalf("%q: encoding/json cannot read %s: %v", line, raw, err)
		}
		if !decodeRecord(raw, new(jsonstr.Times), &byHand) {
			t.Fatalf("%q: not decoded", line)
		}
		// Bytes that are not UTF-8 read as U+FFFD, as encoding/json writes them.
		want := record{Seq: 42, TS: ts, Stream: runners.Stderr, Line: strings.ToValidUTF8(line, "\uFFFD")}
		if byJSON != want || byHand != want {
			t.Fatalf("%q: read as %+v and %+v, want %+v", line, byJSON, byHand, want)
		}
	}
}
