package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/appliance-sh/appliance/engine"
)

// bigMixedLog appends a few thousand lines of several steps, some longer
// than a read block, so tails cross blocks and lines cross buffers.
func bigMixedLog(t *testing.T, l *Logs, jobID string) {
	t.Helper()
	l.SetLimits(LogLimits{LogLine: 1 << 20})
	steps := []string{"a", "b", engine.ServerStep, "a", `we"ird`}
	var batch []engine.LogLine
	for i := range 3000 {
		text := fmt.Sprintf("line %d ", i)
		if i%401 == 7 && steps[i%len(steps)] != `we"ird` {
			text += strings.Repeat("x", 100<<10) // over a read block
		}
		batch = append(batch, line(steps[i%len(steps)], text+"é\"\\"))
		if len(batch) == 97 {
			appendLines(t, l, jobID, batch...)
			batch = nil
		}
	}
	appendLines(t, l, jobID, batch...)
}

// wantPage answers q from the log text the slow, obvious way.
func wantPage(t *testing.T, text string, q engine.LogQuery) (string, engine.LogPage) {
	t.Helper()
	var sel []string
	for _, ln := range strings.SplitAfter(text, "\n") {
		if ln == "" {
			continue
		}
		var l struct {
			Step string `json:"step"`
		}
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			t.Fatalf("log line does not decode: %v", err)
		}
		if q.Step == "" || l.Step == q.Step {
			sel = append(sel, ln)
		}
	}
	from := min(q.After, len(sel))
	if q.Tail > 0 {
		from = max(0, len(sel)-q.Tail)
	}
	next := max(q.After, len(sel))
	if q.Tail > 0 {
		next = len(sel)
	}
	return strings.Join(sel[from:], ""), engine.LogPage{Lines: len(sel) - from, Next: next}
}

type logReader interface {
	ReadLog(ctx context.Context, jobID string, q engine.LogQuery, w io.Writer) (engine.LogPage, error)
}

// checkQueries compares every query against wantPage over text.
func checkQueries(t *testing.T, r logReader, jobID, text string) {
	t.Helper()
	for _, step := range []string{"", "a", "b", engine.ServerStep, `we"ird`, "none"} {
		for _, q := range []engine.LogQuery{
			{}, {Tail: 1}, {Tail: 2}, {Tail: 777}, {Tail: 100000},
			{After: 1}, {After: 500}, {After: 1799}, {After: 2999}, {After: 1000000},
		} {
			q.Step = step
			want, wantP := wantPage(t, text, q)
			var got strings.Builder
			page, err := r.ReadLog(context.Background(), jobID, q, &got)
			if err != nil {
				t.Fatalf("ReadLog(%+v): %v", q, err)
			}
			if got.String() != want || page != wantP {
				t.Fatalf("ReadLog(%+v) = %d bytes, %+v; want %d bytes, %+v", q, got.Len(), page, len(want), wantP)
			}
		}
	}
}

// checkBackfills compares the backfill of a subscription from the tail or
// after a line against wantPage over text.
func checkBackfills(t *testing.T, sub interface {
	Subscribe(string, engine.LogQuery) (io.ReadCloser, <-chan []byte, func(), error)
}, jobID, text string) {
	t.Helper()
	for _, q := range []engine.LogQuery{{}, {Tail: 1}, {Tail: 777}, {Tail: 100000}, {After: 1}, {After: 2999}, {After: 3000}, {After: 1000000}} {
		want, _ := wantPage(t, text, q)
		backfill, _, cancel, err := sub.Subscribe(jobID, q)
		if err != nil {
			t.Fatalf("Subscribe(%+v): %v", q, err)
		}
		got := readBackfill(t, backfill)
		cancel()
		if string(got) != want {
			t.Fatalf("Subscribe(%+v) backfill = %d bytes, want %d", q, len(got), len(want))
		}
	}
}

func TestReadLogTailAndAfterMatchTheWholeLog(t *testing.T) {
	l := openLogs(t)
	bigMixedLog(t, l, "j1")
	data, err := os.ReadFile(l.jsonlPath("j1"))
	if err != nil {
		t.Fatal(err)
	}
	checkQueries(t, l, "j1", string(data))
	checkBackfills(t, l, "j1", string(data))

	// A legacy file reads the same, its last line without a newline too.
	legacy := strings.TrimSuffix(string(data), "\n")
	if err := os.WriteFile(l.legacyPath("j2"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	checkQueries(t, l, "j2", legacy)
	checkBackfills(t, l, "j2", legacy)

	// No log at all is an empty answer that continues where asked.
	var got strings.Builder
	page, err := l.ReadLog(context.Background(), "j3", engine.LogQuery{After: 4}, &got)
	if err != nil || got.Len() != 0 || page != (engine.LogPage{Next: 4}) {
		t.Fatalf("ReadLog of a job without log = %q, %+v, %v", got.String(), page, err)
	}
}

func TestReadLogNeverShowsALineBeingWritten(t *testing.T) {
	l := openLogs(t)
	appendLines(t, l, "j1", line("a", "one"), line("a", "two"))
	f, err := os.OpenFile(l.jsonlPath("j1"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"ts":"2025-03-01T12:00:00Z","stream":"stdout","step":"a","li`) // half an append
	f.Close()
	for _, q := range []engine.LogQuery{{}, {Tail: 1}, {Tail: 5, Step: "a"}, {After: 1}} {
		var got strings.Builder
		page, err := l.ReadLog(context.Background(), "j1", q, &got)
		if err != nil || strings.Contains(got.String(), `"li`+"`") || !strings.HasSuffix(got.String(), "\"two\"}\n") || page.Next != 2 {
			t.Fatalf("ReadLog(%+v) = %q, %+v, %v; want whole lines up to two", q, got.String(), page, err)
		}
	}
}

func TestArchivedLogReadsTailAndAfterLikeTheLocalOne(t *testing.T) {
	f := newArchiveFixture(t, localArchive(t), ArchiveOptions{})
	bigMixedLog(t, f.logs, "j1")
	job := f.finishJob("j1", engine.JobCompleted)
	data, err := os.ReadFile(f.logs.jsonlPath("j1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.waitArchived(job, ""); got != string(data) {
		t.Fatalf("archived %d bytes, want the %d of the local log", len(got), len(data))
	}
	f.removeLocal("j1")
	checkQueries(t, f.arch, "j1", string(data))
	checkBackfills(t, f.arch, "j1", string(data))
}

// A reader that went away stops a long read, whichever lines it selects:
// the whole log, one step's lines, or a step with no lines at all.
func TestReadLogStopsWhenItsContextEnds(t *testing.T) {
	l := openLogs(t)
	batch := make([]engine.LogLine, 0, 10000)
	for i := range cap(batch) {
		batch = append(batch, line([]string{"a", "b"}[i%2], fmt.Sprintf("line %d", i)))
	}
	appendLines(t, l, "j1", batch...)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, step := range []string{"", "a", "none"} {
		var out bytes.Buffer
		if _, err := l.ReadLog(ctx, "j1", engine.LogQuery{Step: step}, &out); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadLog(step %q) with an ended context: %v after %d bytes, want context.Canceled", step, err, out.Len())
		}
	}
}
