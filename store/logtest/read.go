package logtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/engine"
	"github.com/appliance-sh/appliance/store"
)

func testAppendAndStepFilter(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	paris := time.FixedZone("CET", 3600)
	appendLines(t, l, "j1",
		engine.LogLine{TS: time.Date(2025, 3, 1, 13, 0, 0, 123456789, paris), Stream: "stdout", Step: "build", Line: "compiling <main> & co"},
		engine.LogLine{TS: t0, Stream: "stderr", Step: "test", Line: "multi\nline"},
	)
	appendLines(t, l, "j1", engine.LogLine{TS: t0, Stream: "stderr", Step: engine.ServerStep, Line: "hook failed"})

	want := `{"ts":"2025-03-01T12:00:00.123456789Z","stream":"stdout","step":"build","line":"compiling <main> & co"}
{"ts":"2025-03-01T12:00:00Z","stream":"stderr","step":"test","line":"multi\nline"}
{"ts":"2025-03-01T12:00:00Z","stream":"stderr","step":"_server","line":"hook failed"}
`
	if all := read(t, l, "j1", ""); all != want {
		t.Errorf("log:\n%s\nwant:\n%s", all, want)
	}
	if size, ok, err := l.Stored("j1"); err != nil || !ok || size != int64(len(want)) {
		t.Errorf("Stored = %d, %v, %v; want %d bytes", size, ok, err, len(want))
	}
	tests := []struct{ step, want string }{
		{"build", strings.SplitAfter(want, "\n")[0]},
		{"test", strings.SplitAfter(want, "\n")[1]},
		{engine.ServerStep, strings.SplitAfter(want, "\n")[2]},
		{"deploy", ""},
	}
	for _, tt := range tests {
		if got := read(t, l, "j1", tt.step); got != tt.want {
			t.Errorf("Read(j1, %q) = %q; want %q", tt.step, got, tt.want)
		}
	}
}

func testReadWithoutLog(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	var got strings.Builder
	page, err := l.ReadLog(context.Background(), "never-ran", engine.LogQuery{After: 4}, &got)
	if err != nil || got.Len() != 0 || page != (engine.LogPage{Next: 4}) {
		t.Errorf("ReadLog of a job without log = %q, %+v, %v; want nothing, Next 4", got.String(), page, err)
	}
	if _, ok, err := l.Stored("never-ran"); ok || err != nil {
		t.Errorf("Stored = %v, %v; want no log", ok, err)
	}
}

func testConcurrentAppends(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
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

	data := read(t, l, "j", "")
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
	// Each writer's step reads back in its order.
	for w := range writers {
		got := lineTexts(t, []byte(read(t, l, "j", fmt.Sprintf("w%d", w))))
		if len(got) != appends*2 || !strings.HasPrefix(got[len(got)-1], fmt.Sprintf("%d b ", appends-1)) {
			t.Fatalf("step w%d: %d lines, want %d ending with its last", w, len(got), appends*2)
		}
	}
}

func testLinesAfterFinish(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	appendLines(t, l, "j", line("a", "before"))
	l.Finish("j")
	l.Finish("j") // idempotent
	appendLines(t, l, "j", line("a", "after"))
	got := read(t, l, "j", "a")
	if strings.Count(got, "\n") != 2 || !strings.Contains(got, "after") {
		t.Errorf("Read = %q; want both lines", got)
	}
}

func testUnsafeIDs(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", `a\b`, "x\x00y", "a..b", strings.Repeat("x", 300)} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			if err := l.Append(id, []engine.LogLine{line("s", "x")}); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Append error = %v, want ErrInvalid", err)
			}
			if _, err := l.ReadLog(context.Background(), id, engine.LogQuery{}, io.Discard); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("ReadLog error = %v, want ErrInvalid", err)
			}
			if _, _, _, err := l.Subscribe(id, engine.LogQuery{}); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Subscribe error = %v, want ErrInvalid", err)
			}
			if _, err := l.Remove(id); !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Remove error = %v, want ErrInvalid", err)
			}
		})
	}
}

// BigMixedLog appends a few thousand lines of several steps, some longer
// than a read block, so tails cross blocks and lines cross buffers.
func BigMixedLog(t *testing.T, l store.LogBackend, jobID string) (sent []engine.LogLine) {
	t.Helper()
	l.SetLimits(store.LogLimits{LogLine: 1 << 20})
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
			sent = append(sent, batch...)
			batch = nil
		}
	}
	appendLines(t, l, jobID, batch...)
	return append(sent, batch...)
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

type subscriber interface {
	Subscribe(string, engine.LogQuery) (io.ReadCloser, <-chan []byte, func(), error)
}

// CheckQueries compares every query a reader answers against the answer
// worked out from text, the whole log, the slow way.
func CheckQueries(t *testing.T, r logReader, jobID, text string) {
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

// CheckBackfills compares the backfill of a subscription from the tail or
// after a line against the answer worked out from text.
func CheckBackfills(t *testing.T, sub subscriber, jobID, text string) {
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

// checkSent checks that the whole log holds exactly the lines sent.
func checkSent(t *testing.T, text string, sent []engine.LogLine) {
	t.Helper()
	lines, _ := decode(t, text)
	if len(lines) != len(sent) {
		t.Fatalf("log holds %d lines, %d sent", len(lines), len(sent))
	}
	for i, l := range lines {
		if l.Step != sent[i].Step || l.Line != sent[i].Line || l.Stream != sent[i].Stream {
			t.Fatalf("line %d = %+v; sent %+v", i, l, sent[i])
		}
	}
}

func testTailAndAfter(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	sent := BigMixedLog(t, l, "j1")
	text := read(t, l, "j1", "")
	checkSent(t, text, sent)
	CheckQueries(t, l, "j1", text)
	CheckBackfills(t, l, "j1", text)
}

// A reader that went away stops a long read, whichever lines it selects:
// the whole log, one step's lines, or a step with no lines at all.
func testReadStops(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
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

// Readers running while a writer appends see whole lines, in order, and
// each page continues exactly where the last stopped.
func testReadersDuringAppends(t *testing.T, cfg Config) {
	l, _ := open(t, cfg)
	const n = 600
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		step := []string{"", "even", "odd"}[r]
		wg.Go(func() {
			next, got := 0, 0
			for {
				finished := false
				select {
				case <-done:
					finished = true
				default:
				}
				var b strings.Builder
				page, err := l.ReadLog(context.Background(), "j", engine.LogQuery{Step: step, After: next}, &b)
				if err != nil {
					t.Errorf("ReadLog: %v", err)
					return
				}
				lines, _ := decode(t, b.String())
				if len(lines) != page.Lines || page.Next != next+page.Lines {
					t.Errorf("step %q: page %+v after %d with %d lines", step, page, next, len(lines))
					return
				}
				for _, ln := range lines {
					var i int
					fmt.Sscan(ln.Line, &i)
					want := got
					if step != "" {
						want = 2*got + map[string]int{"even": 0, "odd": 1}[step]
					}
					if i != want {
						t.Errorf("step %q: line %d is %d, want %d", step, got, i, want)
						return
					}
					got++
				}
				next = page.Next
				if finished {
					if want := map[string]int{"": n, "even": n / 2, "odd": n / 2}[step]; got != want {
						t.Errorf("step %q: read %d lines, want %d", step, got, want)
					}
					return
				}
			}
		})
	}
	for i := range n {
		appendLines(t, l, "j", line([]string{"even", "odd"}[i%2], fmt.Sprint(i)))
	}
	close(done)
	wg.Wait()
}
