package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/appliance-sh/appliance/api/workerproto"
	"github.com/appliance-sh/appliance/engine/jsonstr"
	"github.com/appliance-sh/appliance/runners"
)

// asServerReads is the push a batch makes, as the server reads it: from
// its raw records when it has them, else from its decoded lines coded as
// a push.
func asServerReads(t *testing.T, b batch) []workerproto.LogLine {
	t.Helper()
	push := LogPush{WorkerID: "w-1", StepName: "build", Run: "r"}
	var body []byte
	if b.raw != nil {
		body = append(append(appendPushHead(nil, push), b.raw...), "]}"...)
	} else {
		push.Lines = b.Lines
		var ok bool
		if body, ok = appendLogPush(nil, push); !ok {
			t.Fatal("a push the worker cannot code")
		}
	}
	var got workerproto.LogPush
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the server cannot read the push: %v\n%s", err, body)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("the server refuses the push: %v\n%s", err, body)
	}
	var fast workerproto.LogPush
	if fast.DecodeFast(body) && !reflect.DeepEqual(fast, got) {
		t.Fatalf("the server's decoder reads %+v, encoding/json %+v", fast, got)
	}
	return got.Lines
}

// samePending checks that the spool's next batch of at most maxLines
// lines means the same to the server handed out raw or decoded, and
// returns the raw one.
func samePending(t *testing.T, r *spoolRun, maxLines int) batch {
	t.Helper()
	raw, err := r.PendingRaw([]byte("stale"), maxLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := r.Pending(maxLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	if raw.lines() != dec.lines() || raw.end != dec.end || !reflect.DeepEqual(raw.Result, dec.Result) {
		t.Fatalf("raw batch: %d lines to %+v, result %v; decoded: %d lines to %+v, result %v",
			raw.lines(), raw.end, raw.Result, dec.lines(), dec.end, dec.Result)
	}
	if raw.lines() == 0 {
		return raw
	}
	if raw.lastSeq() != dec.lastSeq() {
		t.Fatalf("raw batch ends at line %d, decoded at %d", raw.lastSeq(), dec.lastSeq())
	}
	got, want := asServerReads(t, raw), asServerReads(t, dec)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the server reads the raw batch as\n%+v\nthe decoded one as\n%+v", got, want)
	}
	return raw
}

// ackAhead acknowledges b, checking first that the batch read after it
// while it was on its way is the batch read once it is acknowledged.
func ackAhead(t *testing.T, r *spoolRun, b batch, maxLines int) {
	t.Helper()
	ahead, err := r.PendingRawAfter([]byte("stale"), b, maxLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Ack(b); err != nil {
		t.Fatal(err)
	}
	now, err := r.PendingRaw(nil, maxLines, maxPushBytes)
	if err != nil {
		t.Fatal(err)
	}
	if ahead.lines() != now.lines() || ahead.end != now.end || string(ahead.raw) != string(now.raw) || !reflect.DeepEqual(ahead.Result, now.Result) {
		t.Fatalf("read ahead of line %d: %d lines to %+v, result %v; once acknowledged: %d lines to %+v, result %v",
			b.lastSeq(), ahead.lines(), ahead.end, ahead.Result, now.lines(), now.end, now.Result)
	}
}

// The spool's records pass to the server as they are, and mean there
// what the lines they were decoded to meant: lines of every kind, a
// notice of dropped lines, from memory and from disk, across a restart,
// past a record that does not decode and one encoding/json wrote.
func TestSpoolHandsOutItsRecordsAsTheServerReadsTheLines(t *testing.T) {
	dir := t.TempDir()
	sp, _ := openTestSpool(t, dir, 0)
	r := newTestRun(t, sp)
	texts := []string{
		"plain", "", `quote " and backslash \`, "tab\tcr\r", "\x00\x1f\x7f", "<html> & </html>",
		"snow ☃ and 🎉", "line\u2028para", "bad \xff byte", "cut \xe2\x98", "OUTPUT: {\"a\": 1}",
		strings.Repeat("long ", 2000),
	}
	ctx := context.Background()
	for i, s := range texts {
		stream := runners.Stdout
		if i%2 == 1 {
			stream = runners.Stderr
		}
		r.Log(ctx, stream, s)
	}
	r.mu.Lock()
	r.drop(2, "a test <dropped> them & said so", nil)
	r.mu.Unlock()
	r.Log(ctx, runners.Stdout, "after the notice")

	if len(r.recent) != len(texts)+2 {
		t.Fatalf("%d lines in memory, want %d", len(r.recent), len(texts)+2)
	}
	b := samePending(t, r, 3) // from memory
	if b.lines() != 3 || string(b.raw[:len(`{"seq":1,`)]) != `{"seq":1,` {
		t.Fatalf("first batch: %d lines, %.40s", b.lines(), b.raw)
	}
	ackAhead(t, r, b, 3) // from memory
	samePending(t, r, 100)
	r.Flush()
	sp.Close()

	// What another worker version or a crash left: a record that does not
	// decode, and a line coded by encoding/json (its HTML escaped).
	seg := segmentPath(r.dir, r.segs[len(r.segs)-1].num)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := encodeRecord(record{TS: time.Date(2026, 11, 28, 1, 2, 3, 4, time.UTC), Stream: runners.Stderr, Line: "<b>&</b> ☃"}, int64(len(texts)+3))
	if _, err := f.Write(append([]byte("{not json}\n"), rec...)); err != nil {
		t.Fatal(err)
	}
	f.Close()

	_, got, _ := reopenOne(t, dir)
	got.Log(ctx, runners.Stdout, "after the restart")
	got.Finish(Result{ExitCode: 3})
	var all []workerproto.LogLine
	for range 100 {
		b := samePending(t, got, 4) // from disk
		all = append(all, asServerReads(t, b)...)
		if b.Result != nil {
			break
		}
		ackAhead(t, got, b, 4) // from disk
	}
	if n := len(texts) + 4; len(all) != n-3 {
		t.Fatalf("%d lines from disk after the restart, want %d: %+v", len(all), n-3, all)
	}
	for i, l := range all {
		if l.Seq != int64(i+4) {
			t.Fatalf("line %d numbered %d, want %d", i, l.Seq, i+4)
		}
	}
	if l := all[len(all)-2]; l.Line != "<b>&</b> ☃" {
		t.Fatalf("the line encoding/json wrote reads %q", l.Line)
	}
}

// parseLineRecord passes on a record only when the server reads it as the line
// it decodes to; anything else is decoded and coded again.
func FuzzParseLineRecord(f *testing.F) {
	ts := time.Date(2026, 11, 28, 1, 2, 3, 400, time.UTC)
	for _, s := range []string{"plain", `q"b\`, "bad \xff", "☃", ""} {
		f.Add(string(appendLineRecord(nil, new(jsonstr.Times), 7, ts, runners.Stdout, s)))
	}
	f.Add(string(encodeRecord(record{TS: ts, Stream: runners.Stderr, Line: "<&>"}, 9)))
	for _, s := range []string{
		`{"seq":07,"ts":"2026-11-28T01:02:03Z","stream":"stdout","line":"x"}`,
		`{"seq":1,"ts":"2026-13-28T01:02:03Z","stream":"stdout","line":"x"}`,
		`{"seq":1,"ts":"2026-11-28T01:02:03.1234567891Z","stream":"stdout","line":"x"}`,
		`{"seq":1,"ts":"2026-11-28T01:02:03+01:00","stream":"stdout","line":"x"}`,
		`{"seq":1,"ts":"2026-11-28T01:02:03Z","stream":"other","line":"x"}`,
		`{"seq":1,"ts":"2026-11-28T01:02:03Z","stream":"stdout","line":"x"}}`,
		`{"seq":1,"ts":"2026-11-28T01:02:03Z","stream":"stdout","line":"\u12"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, rec string) {
		var times jsonstr.Times // knowing a second, as after a first record
		times.Append(nil, ts)
		p, ok := parseLineRecord([]byte(rec), &times)
		seq := p.seq
		if !ok {
			return
		}
		var l workerproto.LogLine
		if err := json.Unmarshal([]byte(rec), &l); err != nil {
			t.Fatalf("%s passes, the server cannot read it: %v", rec, err)
		}
		var want record
		if !decodeRecord([]byte(rec), new(jsonstr.Times), &want) || want.Seq != seq || want.Result != nil {
			t.Fatalf("%s passes as line %d, decodes as %+v", rec, seq, want)
		}
		if l.Seq != want.Seq || !l.TS.Equal(want.TS) || l.Stream != want.Stream || l.Line != want.Line {
			t.Fatalf("%s: the server reads %+v, the spool %+v", rec, l, want)
		}
		if err := (workerproto.LogPush{WorkerID: "w", StepName: "s", Lines: []workerproto.LogLine{l}}).Validate(); err != nil {
			t.Fatalf("%s passes, the server refuses it: %v", rec, err)
		}
	})
}

// A run's lines go to a real server over HTTP as the spool holds them,
// each batch read while the one before is on its way: when a push fails
// the batch read ahead is dropped, and the next attempt sends again from
// the last line the server took, so the server gets every line once, in
// order, from memory and from the spool alike.
func TestDeliveryReadingAheadSendsEveryLineOnceInOrderAcrossAFailedPush(t *testing.T) {
	for name, pad := range map[string]int{"from memory": 10, "from the spool": 1000} {
		t.Run(name, func(t *testing.T) {
			const n = 2*maxPushLines + 2000
			var mu sync.Mutex
			var got []workerproto.LogLine
			pushes, completed := 0, false
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case strings.HasSuffix(r.URL.Path, "/logs"):
					pushes++
					if pushes == 2 {
						writeJSON(w, http.StatusServiceUnavailable, `{"error": "a moment"}`)
						return
					}
					var p workerproto.LogPush
					if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
						writeJSON(w, http.StatusBadRequest, `{"error": "bad push"}`)
						return
					}
					got = append(got, p.Lines...)
					writeJSON(w, http.StatusOK, `{"status": "ok", "cancelled": false}`)
				case r.URL.Path == "/worker/reports": // the result, on its own
					completed = true
					writeJSON(w, http.StatusOK, `{"results": [{"status": 200}]}`)
				default:
					writeJSON(w, http.StatusNotFound, `{"error": "no such endpoint"}`)
				}
			}))
			t.Cleanup(srv.Close)

			sp, _ := openTestSpool(t, t.TempDir(), 0)
			r := newTestRun(t, sp)
			for i := 1; i <= n; i++ {
				r.Log(context.Background(), runners.Stdout, fmt.Sprintf("line %d %s", i, strings.Repeat("x", pad)))
			}
			r.Finish(Result{})
			w := New(NewClient(srv.URL, "t", nil), Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			d := &delivery{j: r, log: w.log}
			if done, err := w.deliverOnce(context.Background(), d); done || err == nil {
				t.Fatalf("first attempt: done %v, err %v; want the failed push's error", done, err)
			}
			if done, err := w.deliverOnce(context.Background(), d); !done || err != nil {
				t.Fatalf("second attempt: done %v, err %v", done, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !completed || len(got) != n {
				t.Fatalf("the server has %d lines of %d (result: %v)", len(got), n, completed)
			}
			for i, l := range got {
				if l.Seq != int64(i+1) || !strings.HasPrefix(l.Line, fmt.Sprintf("line %d ", i+1)) {
					t.Fatalf("line %d is %d %.20q", i+1, l.Seq, l.Line)
				}
			}
		})
	}
}

// Decoding a segment's line records remembers their second: a line
// record costs its text alone, not a parse of its time each (what a new
// jsonstr.Times a record cost), on the paths that decode the spool.
func TestDecodingLineRecordsAllocatesOnlyTheirText(t *testing.T) {
	ts := time.Date(2026, 11, 28, 6, 30, 0, 0, time.UTC)
	var times jsonstr.Times
	raw := appendLineRecord(nil, &times, 7, ts.Add(123456789), runners.Stdout, "a line of output")
	var rec record
	var read jsonstr.Times
	if !decodeRecord(raw, &read, &rec) || rec.Seq != 7 || rec.Line != "a line of output" || !rec.TS.Equal(ts.Add(123456789)) {
		t.Fatalf("decoded %+v", rec)
	}
	if n := testing.AllocsPerRun(100, func() { decodeRecord(raw, &read, &rec) }); n > 1 {
		t.Fatalf("decoding a line record allocates %v times, want its text alone", n)
	}
}
