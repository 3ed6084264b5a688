package workerproto

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// decodeGeneric decodes a body as the server did before DecodeFast, and
// still does whenever DecodeFast declines: one JSON value by
// encoding/json, nothing but whitespace after it (httpx.UnmarshalJSON).
func decodeGeneric(body []byte) (LogPush, bool) {
	var p LogPush
	dec := json.NewDecoder(bytes.NewReader(body))
	if dec.Decode(&p) != nil || dec.More() {
		return LogPush{}, false
	}
	return p, true
}

// pushSeeds are bodies with a rule of their own, valid or not.
var pushSeeds = []string{
	`{"worker_id":"w-1","step_name":"build","run":"r-1","lines":[{"seq":1,"ts":"2025-03-01T12:00:00.123456789Z","stream":"stdout","line":"hello"},{"seq":2,"ts":"2025-03-01T12:00:01Z","stream":"stderr","line":"oops"}]}`,
	`{"worker_id":"w-1","step_name":"build","lines":[{"ts":"2025-03-01T12:00:00Z","stream":"stdout","line":"no seq, no run"}]}`,
	` { "worker_id" : "w" , "step_name":"s",` + "\n\t\r" + `"lines" : [ { "seq" : 7 , "ts" : "2025-03-01T12:00:00+02:00" , "stream" : "stdout" , "line" : "spaced" } ] } ` + "\n",
	`{"lines":[{"line":"fields in another order","stream":"stdout","ts":"2025-03-01T12:00:00Z","seq":3}],"step_name":"s","worker_id":"w"}`,
	`{"worker_id":"w","step_name":"s","lines":[{"seq":1,"ts":"2025-03-01T12:00:00Z","stream":"stdout","line":"tab\tquote\"back\\slash\/ \u00e9 \ud83c\udf89 \ud83c \udf89x \ud83c\u0041 \u2028 \b\f\n\r \u0000"}]}`,
	`{"worker_id":"w","step_name":"s","lines":[{"seq":1,"ts":"2025-03-01T12:00:00Z","stream":"stdout","line":"raw é 🎉 and bad ` + "\xff\xed\xa0\x80" + `"}]}`,
	`{"worker_id":"w","step_name":"s","lines":[]}`,
	`{"worker_id":"w","step_name":"s","lines":null}`,
	`{"worker_id":null,"step_name":null,"run":null,"lines":[{"seq":null,"ts":null,"stream":null,"line":null}]}`,
	`{"worker_id":"w","step_name":"s","lines":[null]}`,
	`{}`, `{"lines":[{}]}`, `[]`, `null`, `"s"`, `7`, ``, `   `, `{`, `{"worker_id":"w",}`, `{"worker_id":"w"} trailing`, `{"worker_id":"w"}}`, `{"worker_id":"w"}]`, `{"worker_id":"w"} {}`,
	`{"lines":[{"seq":1e3}]}`, `{"lines":[{"seq":-0}]}`, `{"lines":[{"seq":1.0}]}`, `{"lines":[{"seq":01}]}`, `{"lines":[{"seq":-}]}`, `{"lines":[{"seq":"5"}]}`,
	`{"lines":[{"seq":999999999999999999}]}`, `{"lines":[{"seq":9223372036854775807}]}`, `{"lines":[{"seq":9223372036854775808}]}`, `{"lines":[{"seq":-9223372036854775808}]}`, `{"lines":[{"seq":-5}]}`,
	`{"worker_id":"w","other":1,"step_name":"s"}`, `{"Worker_ID":"w","STEP_NAME":"s","Lines":[{"Seq":1,"TS":"2025-03-01T12:00:00Z"}]}`, `{"\u0077orker_id":"w"}`, `{"ſtep_name":"s"}`,
	`{"worker_id":"a","worker_id":"b"}`, `{"lines":[{"seq":1,"stream":"stdout"}],"lines":[{"line":"merged"}]}`, `{"lines":[{"line":"a","line":"b"}]}`,
	`{"worker_id":5}`, `{"worker_id":true}`, `{"lines":{}}`, `{"lines":"x"}`, `{"lines":[{"ts":5}]}`, `{"lines":[{"stream":1}]}`, `{"lines":[1]}`,
	`{"lines":[{"ts":"2025-03-01T12:00:00"}]}`, `{"lines":[{"ts":"2025-03-01 12:00:00Z"}]}`, `{"lines":[{"ts":"2025-03-01T12:00:00\u005a"}]}`, `{"lines":[{"ts":"2025-02-30T12:00:00Z"}]}`, `{"lines":[{"ts":"2025-03-01T24:00:00Z"}]}`, `{"lines":[{"ts":"0000-01-01T00:00:00Z"}]}`, `{"lines":[{"ts":"2025-03-01T12:00:00.Z"}]}`, `{"lines":[{"ts":"2025-03-01T12:00:00-00:00"}]}`,
	`{"lines":[{"stream":"stdout"` + "\x00" + `"}]}`, `{"step_name":"a` + "\n" + `b"}`, `{"step_name":"\x"}`, `{"step_name":"\u12"}`, `{"step_name":"no end`, `{"step_name":nul}`, `{"step_name" "s"}`,
	`{"lines":[{"stream":"stdouts"}]}`, `{"lines":[{"stream":"std\u006fut"}]}`, `{"lines":[{"stream":"stdout` + `\"}]}`,
	"\ufeff{}", "\v{}", `{"lines":[` + strings.Repeat(`{"seq":1},`, 50) + `{"seq":2}]}`,
}

// FuzzLogPushDecode: a body DecodeFast takes is one encoding/json takes,
// with the same meaning; one it declines is left as it was, for
// encoding/json to decode or refuse.
func FuzzLogPushDecode(f *testing.F) {
	for _, s := range pushSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sentinel := LogPush{WorkerID: "untouched"}
		got := sentinel
		fast := got.DecodeFast(body)
		want, ok := decodeGeneric(body)
		switch {
		case !fast:
			if !reflect.DeepEqual(got, sentinel) {
				t.Fatalf("DecodeFast declined %q but changed the push to %+v", body, got)
			}
		case !ok:
			t.Fatalf("DecodeFast took %q as %+v, encoding/json refuses it", body, got)
		case !reflect.DeepEqual(got, want):
			t.Fatalf("DecodeFast took %q as\n%+v\nencoding/json decodes\n%+v", body, got, want)
		}
	})
}

// The bodies a worker sends (encoding/json's output, or any encoder's
// spacing) take the fast path; otherwise it would save nothing.
func TestDecodeFastTakesTheBodiesWorkersSend(t *testing.T) {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	pushes := []LogPush{
		{WorkerID: "w-1", StepName: "build", Run: "r-1", Lines: []LogLine{
			{Seq: 1, TS: ts, Stream: Stdout, Line: "compiling"},
			{Seq: 2, TS: ts.Add(time.Second), Stream: Stderr, Line: "warning: \"x\" <unused> \u00e9\t🎉\x01"},
			{Seq: 1 << 40, TS: ts.In(time.FixedZone("", 3600)), Stream: Stdout, Line: ""},
		}},
		{WorkerID: "w-2", StepName: "test", Lines: []LogLine{{TS: ts, Stream: Stdout, Line: "unnumbered"}}},
		{WorkerID: "w-3", StepName: "idle", Lines: []LogLine{}},
		{WorkerID: "w-3", StepName: "idle"},
	}
	for _, p := range pushes {
		plain, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		indented, err := json.MarshalIndent(p, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		for _, body := range [][]byte{plain, indented} {
			want, _ := decodeGeneric(body)
			var got LogPush
			if !got.DecodeFast(body) {
				t.Errorf("DecodeFast declined %s", body)
				continue
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeFast took %s as\n%+v\nencoding/json decodes\n%+v", body, got, want)
			}
		}
	}
}

// BenchmarkLogPushDecode decodes a push of 500 lines of 100 bytes, as a
// flooding step's worker sends them, both ways.
func BenchmarkLogPushDecode(b *testing.B) {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := LogPush{WorkerID: "4f9c2b7e-worker", StepName: "flood", Run: "r-1"}
	for i := range 500 {
		p.Lines = append(p.Lines, LogLine{Seq: int64(i + 1), TS: ts.Add(time.Duration(i) * 1234567), Stream: Stdout, Line: strings.Repeat("x", 100)})
	}
	body, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	perLine := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(p.Lines)), "ns/line")
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeGeneric(body); !ok {
				b.Fatal("refused")
			}
		}
		perLine(b)
	})
	for name, body := range map[string][]byte{"fast": body, "fast-escaped": escapedPush(500)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var got LogPush
				if !got.DecodeFast(body) {
					b.Fatal("declined")
				}
			}
			perLine(b)
		})
	}
}

// escapedPush is a push of n lines that need unescaping (a tab, a
// terminal colour), as a CI step's output has them.
func escapedPush(n int) []byte {
	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := LogPush{WorkerID: "4f9c2b7e-worker", StepName: "build", Run: "r-1"}
	for i := range n {
		p.Lines = append(p.Lines, LogLine{Seq: int64(i + 1), TS: ts, Stream: Stdout, Line: "\x1b[32mok\x1b[0m\t" + strings.Repeat("x", 80)})
	}
	body, _ := json.Marshal(p)
	return body
}

// A line with an escape costs about its size to decode: its text was
// once given room for all the body left after it, so a push of escaped
// lines allocated about its size times its lines.
func TestDecodingEscapedLinesAllocatesAboutTheirSize(t *testing.T) {
	body := escapedPush(2000)
	var got LogPush
	if !got.DecodeFast(body) || len(got.Lines) != 2000 || !strings.HasPrefix(got.Lines[0].Line, "\x1b[32mok") {
		t.Fatal("the push is not decoded")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 5
	for range runs {
		var p LogPush
		p.DecodeFast(body)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4*uint64(len(body)) {
		t.Fatalf("decoding a %d-byte push of escaped lines allocates %d bytes", len(body), per)
	}
}
