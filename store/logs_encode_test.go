package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine"
)

// encodeLinesJSON is how the log files were written before encodeLines
// was written by hand: the files must not change by a byte.
func encodeLinesJSON(t testing.TB, lines []engine.LogLine) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ln := range lines {
		if err := enc.Encode(wireLine{TS: ln.TS.UTC().Format(time.RFC3339Nano), Stream: ln.Stream, Step: ln.Step, Line: ln.Line}); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// FuzzEncodeLines: a line is written as encoding/json wrote it, and
// reads back as the line it was (when its strings are valid UTF-8;
// encoding/json writes U+FFFD for the bytes that are not).
func FuzzEncodeLines(f *testing.F) {
	for _, s := range []string{
		"plain", "", `quote " backslash \ slash /`, "tab\tnl\ncr\r\b\f\x00\x1f\x7f", "<b>&amp;</b>",
		"é ☃ 🎉", "\u2028\u2029", "bad \xff", "cut \xe2\x98", "\xed\xa0\x80", `\u00e9 as text`,
	} {
		f.Add(s, "build", int64(1740830400123456789), "stdout")
	}
	f.Add("line", "step \"quoted\"\t", int64(0), "stderr")
	f.Add("line", "_server", int64(-62135596800), "std\x00out")
	f.Fuzz(func(t *testing.T, line, step string, nanos int64, stream string) {
		ln := engine.LogLine{TS: time.Unix(0, nanos).In(time.FixedZone("", 3600)), Stream: stream, Step: step, Line: line}
		chunk, ends := encodeLines([]engine.LogLine{ln, ln})
		if want := encodeLinesJSON(t, []engine.LogLine{ln, ln}); !bytes.Equal(chunk, want) {
			t.Fatalf("encodeLines wrote\n%s\nencoding/json wrote\n%s", chunk, want)
		}
		if ends[1] != len(chunk) || 2*ends[0] != len(chunk) {
			t.Fatalf("lines end at %v in a chunk of %d bytes", ends, len(chunk))
		}
		var got wireLine
		if err := json.Unmarshal(chunk[:ends[0]], &got); err != nil {
			t.Fatal(err)
		}
		want := wireLine{TS: ln.TS.UTC().Format(time.RFC3339Nano), Stream: stream, Step: step, Line: line}
		valid := utf8.ValidString(stream) && utf8.ValidString(step) && utf8.ValidString(line)
		if valid && got != want {
			t.Fatalf("line %+v reads back as %+v", want, got)
		}
	})
}
