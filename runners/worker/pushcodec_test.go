package worker

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/api/workerproto"
)

// FuzzAppendLogPush: a push coded by hand reads back, with encoding/json
// (as the server reads it), as the push encoding/json codes, whatever its
// strings hold; what it leaves to encoding/json it leaves whole.
func FuzzAppendLogPush(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te and back\slash`, "tab\tcr\rlf\nnul\x00 \x1f\x7f",
		"<html> & ünïcödé ✓", "line\u2028sep\u2029para", "bad \xff byte", "\xed\xa0\x80 surrogate", "OUTPUT: {\"a\": [1, 2]}"} {
		f.Add("w-1", "build", "run-1", "stdout", s, int64(7), int64(1_764_260_000), int64(123_456_789), 0)
		f.Add(s, s, s, s, s, int64(0), int64(0), int64(0), 3600)
	}
	// A zone a day off, years of five digits and before year 0: encoding/json refuses them.
	f.Add("w", "s", "", "stderr", "x", int64(1), int64(0), int64(0), 24*3600)
	f.Add("w", "s", "", "stderr", "x", int64(1), int64(253_402_300_800), int64(0), 0)
	f.Add("w", "s", "", "stderr", "x", int64(1), int64(-62_135_596_801), int64(0), 0)
	f.Fuzz(func(t *testing.T, worker, step, run, stream, line string, seq, secs, nanos int64, offset int) {
		ts := time.Unix(secs, nanos).In(time.FixedZone("", offset%(48*3600)))
		push := workerproto.LogPush{WorkerID: worker, StepName: step, Run: run, Lines: []workerproto.LogLine{
			{Seq: seq, TS: ts, Stream: stream, Line: line},
			{Seq: seq + 1, TS: time.Unix(0, nanos).UTC(), Stream: "stdout", Line: "next"},
		}}
		prefix := []byte("kept")
		hand, ok := appendLogPush(prefix, push)
		if !bytes.HasPrefix(hand, prefix) {
			t.Fatalf("what was before the push is gone: %q", hand)
		}
		if !ok {
			valid := utf8.ValidString(worker) && utf8.ValidString(step) && utf8.ValidString(run) && utf8.ValidString(stream) && utf8.ValidString(line)
			if len(hand) != len(prefix) || valid && jsonTime(ts) {
				t.Fatalf("left a push it can code to encoding/json, or not whole: %q", hand)
			}
			return
		}
		byJSON, err := json.Marshal(push)
		if err != nil {
			t.Fatalf("coded by hand a push encoding/json refuses (%v): %s", err, hand)
		}
		var got, want workerproto.LogPush
		if err := json.Unmarshal(hand[len(prefix):], &got); err != nil {
			t.Fatalf("encoding/json cannot read %s: %v", hand[len(prefix):], err)
		}
		if err := json.Unmarshal(byJSON, &want); err != nil {
			t.Fatal(err)
		}
		if got.WorkerID != want.WorkerID || got.StepName != want.StepName || got.Run != want.Run || len(got.Lines) != len(want.Lines) {
			t.Fatalf("read back as %+v, want %+v", got, want)
		}
		for i := range want.Lines {
			g, w := got.Lines[i], want.Lines[i]
			_, goff := g.TS.Zone()
			_, woff := w.TS.Zone()
			if g.Seq != w.Seq || !g.TS.Equal(w.TS) || goff != woff || g.Stream != w.Stream || g.Line != w.Line {
				t.Fatalf("line %d read back as %+v, want %+v", i, g, w)
			}
		}
	})
}

func TestAppendLogPushCodesAPushWithoutLinesAsAnEmptyList(t *testing.T) {
	raw, ok := appendLogPush(nil, workerproto.LogPush{WorkerID: "w-1", StepName: "build"})
	if want := `{"worker_id":"w-1","step_name":"build","lines":[]}`; !ok || string(raw) != want {
		t.Fatalf("coded %s (%v), want %s", raw, ok, want)
	}
}
