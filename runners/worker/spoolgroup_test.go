package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/appliance-sh/appliance/runners"
)

// segmentWrites counts a spool's segment writes and can fail them.
type segmentWrites struct {
	mu    sync.Mutex
	sizes []int // bytes of each call
	// fail, when set, answers the next call: it writes half of what it is
	// given (a disk that fills mid-write) and returns the error; with
	// closeFile it closes the file too, so it cannot be cut.
	fail      error
	closeFile bool
}

func countWrites(sp *Spool) *segmentWrites {
	w := &segmentWrites{}
	sp.write = func(f *os.File, p []byte) (int, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.sizes = append(w.sizes, len(p))
		if err := w.fail; err != nil {
			w.fail = nil
			n, _ := f.Write(p[:len(p)/2])
			if w.closeFile {
				f.Close()
			}
			return n, err
		}
		return f.Write(p)
	}
	return w
}

func (w *segmentWrites) calls() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sizes)
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// TestSpoolWritesALinesGroupInOneCallWhenFlushed: lines logged stay in
// memory until the reader says it read all there was; then they go to the
// segment in one write, and a worker killed after that keeps them.
func TestSpoolWritesALinesGroupInOneCallWhenFlushed(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	writes := countWrites(sp)
	r := newTestRun(t, sp)
	logLines(r, 1, 100)
	seg := segmentPath(r.dir, 1)
	if writes.calls() != 0 || fileSize(t, seg) != 0 {
		t.Fatalf("%d writes, %d bytes in the segment before the flush; want none", writes.calls(), fileSize(t, seg))
	}
	r.Flush()
	if writes.calls() != 1 || fileSize(t, seg) != sp.used.Load() {
		t.Fatalf("%d writes, %d bytes in the segment after the flush; want 1 and the %d bytes counted", writes.calls(), fileSize(t, seg), sp.used.Load())
	}
	r.Flush() // nothing staged: no call
	if writes.calls() != 1 {
		t.Fatalf("%d writes after a flush of nothing, want 1", writes.calls())
	}
	sp.Close() // killed here, mid-step

	_, got, _ := reopenOne(t, dir)
	lines, _ := drain(t, got, maxPushLines)
	wantNumbered(t, lines, 1, 100)
}

// TestSpoolWritesAGroupAtItsBound: a step whose reader never runs dry
// (one that prints without pause) still has its lines written, in groups
// of about maxGroup.
func TestSpoolWritesAGroupAtItsBound(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 0)
	writes := countWrites(sp)
	r := newTestRun(t, sp)
	long := strings.Repeat("x", 100)
	n := 5 * maxGroup / 100
	for range n {
		r.Log(context.Background(), runners.Stdout, long)
	}
	writes.mu.Lock()
	sizes := append([]int(nil), writes.sizes...)
	writes.mu.Unlock()
	written := 0
	for _, size := range sizes {
		if size < maxGroup || size > maxGroup+200 {
			t.Fatalf("writes of %v bytes, want each just past %d", sizes, maxGroup)
		}
		written += size
	}
	if left := sp.used.Load() - int64(written); left < 0 || left >= maxGroup {
		t.Fatalf("%d of %d bytes of records not written, want less than a group", left, sp.used.Load())
	}
}

// TestSpoolWritesItsGroupBeforeReadingTheSegments: lines still in memory
// are in the batch delivery reads back from disk (here after a restart,
// with older lines undelivered, so recent lines are not held for it).
func TestSpoolWritesItsGroupBeforeReadingTheSegments(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	logLines(r, 1, 3)
	r.Flush()
	sp.Close()

	sp2, got, _ := reopenOne(t, dir)
	writes := countWrites(sp2)
	got.Log(context.Background(), runners.Stdout, "line 4")
	got.Log(context.Background(), runners.Stdout, "line 5")
	if len(got.recent) != 0 || writes.calls() != 0 {
		t.Fatalf("%d lines in memory for delivery, %d writes: want delivery to read the spool, lines not yet written", len(got.recent), writes.calls())
	}
	b, err := got.Pending(maxPushLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	wantNumbered(t, b.Lines, 1, 5)
}

// TestSpoolWriteFailureDropsTheGroupUnderOneNotice: a write that fails
// mid-group loses the group's lines; none of them was handed to delivery,
// the notice says how many, and the numbering goes on from the last line
// written: nothing twice, no number missing.
func TestSpoolWriteFailureDropsTheGroupUnderOneNotice(t *testing.T) {
	dir := t.TempDir()
	sp, logs := openTestSpool(t, dir, 0)
	writes := countWrites(sp)
	r := newTestRun(t, sp)
	logLines(r, 1, 5)
	r.Flush()
	for i := 6; i <= 10; i++ {
		r.Log(context.Background(), runners.Stdout, fmt.Sprintf("lost %d", i))
	}
	writes.fail = errors.New("no space left on device")
	// Delivery writes the group out before it hands out a line: the
	// failure takes the group's lines, which the server then never sees.
	b, err := r.Pending(maxPushLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	wantNumbered(t, b.Lines, 1, 5)
	if err := r.Ack(b); err != nil {
		t.Fatal(err)
	}
	if size := fileSize(t, segmentPath(r.dir, 1)); size != sp.used.Load()+r.pos.off {
		t.Fatalf("segment holds %d bytes after the failed write; want the whole records counted: %d delivered, %d not", size, r.pos.off, sp.used.Load())
	}
	r.Log(context.Background(), runners.Stdout, "line 7")
	r.Flush()
	r.Finish(Result{})
	lines, res := drain(t, r, maxPushLines)
	if res == nil || len(lines) != 2 {
		t.Fatalf("after the failure: %+v (result %v), want the notice, one line and the result", lines, res)
	}
	notice, next := lines[0], lines[1]
	if notice.Seq != 6 || notice.Stream != runners.Stderr || !strings.Contains(notice.Line, "5 log lines dropped") || !strings.Contains(notice.Line, "no space left on device") {
		t.Fatalf("notice %+v, want number 6 telling 5 lines lost to the failed write", notice)
	}
	if next.Seq != 7 || next.Line != "line 7" {
		t.Fatalf("line after the notice %+v, want line 7 numbered 7", next)
	}
	if !strings.Contains(logs.String(), "cannot write the step's log") {
		t.Errorf("worker log does not tell the failed write:\n%s", logs)
	}
	// What a restart reads back agrees.
	sp.Close()
	_, got, rlogs := reopenOne(t, dir)
	if strings.Contains(rlogs.String(), "half-written") || got.seq != 7 {
		t.Fatalf("reloaded run numbered up to %d (want 7), log:\n%s", got.seq, rlogs)
	}
}

// TestSpoolWriteFailureThatCannotBeCutSkipsItsNumbers: when the failed
// write cannot be cut off, its whole records may stay on disk: their
// numbers are not given again, and what follows goes to a new segment.
func TestSpoolWriteFailureThatCannotBeCutSkipsItsNumbers(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	writes := countWrites(sp)
	r := newTestRun(t, sp)
	r.Log(context.Background(), runners.Stdout, "line 1")
	r.Flush()
	for i := 2; i <= 5; i++ {
		r.Log(context.Background(), runners.Stdout, fmt.Sprintf("lost %d", i))
	}
	writes.fail, writes.closeFile = errors.New("input/output error"), true
	r.Flush()
	r.Log(context.Background(), runners.Stdout, "line 7")
	r.Finish(Result{})
	if segmentFiles(t, r.dir) != 2 {
		t.Fatalf("%d segments, want the failed one left and a new one", segmentFiles(t, r.dir))
	}
	sp.Close()

	_, got, _ := reopenOne(t, dir)
	lines, res := drain(t, got, maxPushLines)
	if res == nil {
		t.Fatal("no result")
	}
	seen := map[int64]bool{}
	last := int64(0)
	for _, l := range lines {
		if seen[l.Seq] || l.Seq <= last {
			t.Fatalf("line numbered %d comes twice or out of order: %+v", l.Seq, lines)
		}
		seen[l.Seq], last = true, l.Seq
	}
	if n := len(lines); n < 3 || lines[0].Line != "line 1" || !strings.Contains(lines[n-2].Line, "4 log lines dropped") || lines[n-1].Line != "line 7" || lines[n-1].Seq != 7 {
		t.Fatalf("delivered %+v, want line 1, what the failed write left, the notice (6) and line 7", lines)
	}
}
