package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine/workflow"
	"github.com/appliance-sh/appliance/runners"
	"github.com/appliance-sh/appliance/runners/local"
)

// fullJournals are the two journals, each bounded far below the lines the
// tests write: a memory one of 16KiB and a 16KiB spool.
func fullJournals(t *testing.T) map[string]func() journal {
	return map[string]func() journal{
		"memory": func() journal {
			return newMemJournal(runMeta{JobID: "job-1", Step: "build"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 16<<10)
		},
		"spool": func() journal {
			sp, _ := openTestSpool(t, t.TempDir(), 16<<10)
			return newTestRun(t, sp)
		},
	}
}

// writeLines logs lines 1..n to j from another goroutine, as a step's
// output reader does; done is closed once the last is taken.
func writeLines(ctx context.Context, j journal, n int) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			j.Log(ctx, runners.Stdout, fmt.Sprintf("line %d", i))
		}
	}()
	return done
}

// waitBlocked waits until a writer of j waits for room (wanted closes) and
// checks that it is still waiting a moment later.
func waitBlocked(t *testing.T, wanted <-chan struct{}, done <-chan struct{}) {
	t.Helper()
	select {
	case <-wanted:
	case <-done:
		t.Fatal("the writer took every line: the journal is not bounded")
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never waited for room")
	}
	select {
	case <-done:
		t.Fatal("the writer went on without delivery: lines were dropped, not held back")
	case <-time.After(100 * time.Millisecond):
	}
}

func TestFullJournalHoldsItsWriterUntilDeliveryFreesRoom(t *testing.T) {
	for name, open := range fullJournals(t) {
		t.Run(name, func(t *testing.T) {
			j := open()
			const n = 5000 // ~40 KiB as records: more than twice the bound
			wanted := j.Wanted()
			done := writeLines(context.Background(), j, n)
			waitBlocked(t, wanted, done)
			held, err := j.Pending(n, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if len(held.Lines) == 0 || len(held.Lines) >= n/2 {
				t.Fatalf("a full journal holds %d lines of %d", len(held.Lines), n)
			}

			// Delivering frees room: the writer goes on, and every line
			// arrives once, in order.
			var got []LogLine
			for {
				b, err := j.Pending(100, maxPushBytes)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, b.Lines...)
				if err := j.Ack(b); err != nil {
					t.Fatal(err)
				}
				if len(b.Lines) == 0 && closed(done) {
					break
				}
			}
			j.Finish(Result{})
			rest, res := drain(t, j, 100)
			got = append(got, rest...)
			wantNumbered(t, got, 1, n)
			if res == nil {
				t.Fatal("no result")
			}
		})
	}
}

func TestStoppingTheStepReleasesAWriterWaitingOnAFullJournal(t *testing.T) {
	for name, open := range fullJournals(t) {
		t.Run(name, func(t *testing.T) {
			j := open()
			ctx, kill := context.WithCancelCause(context.Background())
			const n = 5000
			wanted := j.Wanted()
			done := writeLines(ctx, j, n)
			waitBlocked(t, wanted, done)

			kill(errors.New("Step timed out after 5s"))
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the writer still waits for room after the step was stopped")
			}
			j.Finish(runners.Failed(runners.ExitKilled, "Step timed out after 5s"))
			lines, res := drain(t, j, maxPushLines)
			if res == nil || res.ExitCode != runners.ExitKilled {
				t.Fatalf("result %+v, want the kept result of the killed step", res)
			}
			kept := len(lines) - 1
			wantNumbered(t, lines[:kept], 1, kept)
			notice := lines[kept]
			want := fmt.Sprintf("[appliance worker: %d log lines dropped: the step was being stopped (Step timed out after 5s) while its output waited for the server to take earlier lines]", n-kept)
			if notice.Line != want || notice.Stream != runners.Stderr || notice.Seq != int64(kept+1) {
				t.Fatalf("last line %+v, want the notice %q", notice, want)
			}
			if strings.Contains(notice.Line, "unreachable") {
				t.Fatalf("notice %q names a cause that did not happen", notice.Line)
			}
		})
	}
}

// TestSpoolRunWaitsForRoomAnotherRunHolds fills a spool with one run's
// lines: another run's writer waits until that run is delivered.
func TestSpoolRunWaitsForRoomAnotherRunHolds(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 16<<10)
	other := newTestRun(t, sp)
	for i := 1; sp.used.Load() < 16<<10-200; i++ {
		other.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d", i))
	}
	r := newTestRun(t, sp)
	wanted := r.Wanted()
	done := make(chan struct{})
	go func() { defer close(done); r.Log(context.Background(), runners.Stdout, strings.Repeat("x", 500)) }()
	waitBlocked(t, wanted, done)
	other.Remove() // delivered: room again
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer still waits once the other run was delivered")
	}
	r.Finish(Result{})
	lines, _ := drain(t, r, 100)
	if len(lines) != 1 || lines[0].Line != strings.Repeat("x", 500) {
		t.Fatalf("lines %+v, want the waiting line", lines)
	}
}

// TestSpoolBoundCountsUndeliveredBytes: delivered lines free their room at
// once, even while their segment is still the one written.
func TestSpoolBoundCountsUndeliveredBytes(t *testing.T) {
	sp, _ := openTestSpool(t, t.TempDir(), 1<<20)
	r := newTestRun(t, sp)
	for i := 1; i <= 100; i++ {
		r.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d", i))
	}
	if sp.used.Load() == 0 {
		t.Fatal("a spool holding lines uses nothing")
	}
	lines, _ := drain(t, r, 1000)
	wantNumbered(t, lines, 1, 100)
	if sp.used.Load() != 0 {
		t.Fatalf("a spool whose lines are all delivered uses %d bytes, want 0", sp.used.Load())
	}
	r.Finish(Result{})
	r.Remove()
	if sp.used.Load() != 0 {
		t.Fatalf("spool uses %d bytes after the run is removed, want 0", sp.used.Load())
	}
}

// TestStepHeldBackByAFullJournalIsStillKilledAtItsTimeout runs a step
// printing without end into a journal nobody delivers: it waits on its
// full pipe, and its timeout still kills it promptly.
func TestStepHeldBackByAFullJournalIsStillKilledAtItsTimeout(t *testing.T) {
	j := newMemJournal(runMeta{JobID: "job-1", Step: "flood"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 16<<10)
	ctx, cancel := context.WithTimeoutCause(testContext(t), 500*time.Millisecond, runners.TimeoutError(0.5))
	defer cancel()
	l := local.New(local.Config{DepsDir: t.TempDir(), KillGrace: 500 * time.Millisecond})
	began := time.Now()
	res := runners.Execute(ctx, l, &runners.Step{JobID: "job-1", Name: "flood", Dir: t.TempDir(),
		Action: &workflow.Action{Type: workflow.TypeScript, Script: "yes line"},
		Log:    func(stream, line string) { j.Log(ctx, stream, line) }})
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("the held-back step took %v to stop at its 0.5s timeout", took)
	}
	if errText(res) != "Step timed out after 0.5s" {
		t.Fatalf("result %+v, want the timeout", res)
	}
	j.Finish(res)
	lines, _ := drain(t, j, maxPushLines)
	last := lines[len(lines)-1].Line
	if !strings.Contains(last, "log lines dropped: the step was being stopped (Step timed out after 0.5s)") {
		t.Fatalf("last line %q, want the notice naming the timeout", last)
	}
}

// TestLinesWaitingForRoomAfterTheStepExitsAreKept: a step that printed
// more than its journal holds, then exited, keeps every line left in its
// pipe though delivery only comes long after the readers' grace.
func TestLinesWaitingForRoomAfterTheStepExitsAreKept(t *testing.T) {
	j := newMemJournal(runMeta{JobID: "job-1", Step: "burst"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 16<<10)
	dir := t.TempDir()
	const n = 4000 // ~37 KB: more than the journal holds, less than the pipe
	l := local.New(local.Config{DepsDir: t.TempDir()})
	got := make(chan Result, 1)
	go func() {
		got <- runners.Execute(testContext(t), l, &runners.Step{JobID: "job-1", Name: "burst", Dir: dir,
			Action: &workflow.Action{Type: workflow.TypeScript, Script: fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "line $i"; i=$((i+1)); done; touch exited`, n)},
			Log:    func(stream, line string) { j.Log(context.Background(), stream, line) }})
	}()
	eventually(t, 20*time.Second, "the step to exit", func() bool {
		_, err := os.Stat(filepath.Join(dir, "exited"))
		return err == nil
	})
	// Delivery is late by more than the readers' grace: the wait for room
	// must not count towards it.
	time.Sleep(runners.ReaderGrace + time.Second)
	var lines []LogLine
	for res := (*Result)(nil); res == nil; {
		select {
		case r := <-got:
			res = &r
			j.Finish(r)
		default:
		}
		more, _ := drain(t, j, 100)
		lines = append(lines, more...)
	}
	wantNumbered(t, lines, 1, n)
}

// TestDockerStepHeldBackByAFullJournalKeepsEveryLine runs a container
// printing far more than its journal holds, with delivery beginning only
// after the readers' grace: the attach stream is held, not cut, and every
// line arrives in order.
func TestDockerStepHeldBackByAFullJournalKeepsEveryLine(t *testing.T) {
	d, client := needDocker(t)
	j := newMemJournal(runMeta{JobID: "job-1", Step: "burst"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 16<<10)
	const n = 20_000
	got := make(chan Result, 1)
	go func() {
		step := dockerStep(t, client, &workflow.Action{Type: workflow.TypeDocker, Image: testImage,
			Cmd: fmt.Sprintf(`i=1; while [ $i -le %d ]; do echo "line $i"; i=$((i+1)); done`, n)}, nil, &lines{})
		step.Log = func(stream, line string) { j.Log(context.Background(), stream, line) }
		got <- runners.Execute(testContext(t), d, step)
	}()
	time.Sleep(runners.ReaderGrace + time.Second) // delivery is late on purpose
	var all []LogLine
	for res := (*Result)(nil); res == nil; {
		select {
		case r := <-got:
			res = &r
			if r.Error != nil {
				t.Fatalf("step failed: %s", *r.Error)
			}
			j.Finish(r)
		default:
		}
		more, _ := drain(t, j, 100)
		all = append(all, more...)
	}
	wantNumbered(t, all, 1, n)
}

// A full push's worth of lines wakes delivery at once, as a writer
// waiting for room does, rather than at the next LogPushInterval: a step
// that floods is delivered while it runs (see maxPushLines).
func TestAFullPushWakesDelivery(t *testing.T) {
	journals := map[string]func() journal{
		"memory": func() journal {
			return newMemJournal(runMeta{JobID: "job-1", Step: "build"}, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
		},
		"spool": func() journal {
			sp, _ := openTestSpool(t, t.TempDir(), 0)
			return newTestRun(t, sp)
		},
	}
	for name, open := range journals {
		t.Run(name, func(t *testing.T) {
			j := open()
			wanted := j.Wanted()
			logLines(j, 1, maxPushLines-1)
			if closed(wanted) {
				t.Fatalf("delivery woken with %d lines waiting, fewer than a push takes", maxPushLines-1)
			}
			logLines(j, maxPushLines, maxPushLines)
			if !closed(wanted) {
				t.Fatalf("delivery not woken with %d lines waiting", maxPushLines)
			}
			// Once delivery took them, the next full push wakes it again.
			b, err := j.Pending(maxPushLines, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Ack(b); err != nil {
				t.Fatal(err)
			}
			wanted = j.Wanted()
			logLines(j, maxPushLines+1, 2*maxPushLines-1)
			if closed(wanted) {
				t.Fatal("delivery woken again before a full push waits")
			}
			logLines(j, 2*maxPushLines, 2*maxPushLines)
			if !closed(wanted) {
				t.Fatal("delivery not woken by the second full push")
			}
		})
	}
}
