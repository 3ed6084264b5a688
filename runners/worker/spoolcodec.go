package worker

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/engine/jsonstr"
)

// A spool record of a log line, the bulk of what the spool writes and
// reads back, is encoded and decoded here by hand, in the form
// encoding/json gives it ({"seq":N,"ts":"...","stream":"...","line":"..."}):
// reflection cost most of a flooding step's spool time. Anything else, and
// any line this does not read, goes through encoding/json.

// appendLineRecord appends the record of a log line numbered seq, as
// encoding/json writes it (bytes that are not UTF-8 become \ufffd).
func appendLineRecord(dst []byte, times *jsonstr.Times, seq int64, ts time.Time, stream, line string) []byte {
	dst = append(dst, `{"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"ts":"`...)
	dst = times.Append(dst, ts)
	dst = append(dst, `","stream":`...)
	dst = jsonstr.AppendString(dst, stream)
	dst = append(dst, `,"line":`...)
	dst = jsonstr.AppendString(dst, line)
	return append(dst, "}\n"...)
}

// decodeLineRecord reads a log line's record as appendLineRecord (or
// encoding/json) wrote it; false when raw is anything else, or a line it
// leaves to encoding/json (one with escapes).
func decodeLineRecord(raw []byte, rec *record) bool {
	raw = bytes.TrimRight(raw, "\n")
	rest, ok := bytes.CutPrefix(raw, []byte(`{"seq":`))
	if !ok {
		return false
	}
	i := bytes.IndexByte(rest, ',')
	if i < 0 {
		return false
	}
	seq, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"ts":"`)); !ok {
		return false
	}
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(rest[:i]))
	if err != nil {
		return false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`","stream":"`)); !ok {
		return false
	}
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return false
	}
	stream := rest[:i]
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`","line":"`)); !ok {
		return false
	}
	line, ok := bytes.CutSuffix(rest, []byte(`"}`))
	if !ok || bytes.IndexByte(line, '\\') >= 0 || bytes.IndexByte(line, '"') >= 0 || bytes.IndexByte(stream, '\\') >= 0 {
		return false
	}
	*rec = record{Seq: seq, TS: ts, Stream: string(stream), Line: string(line)}
	return true
}

// lineElem tells whether rec, a record without its newline, is a log
// line as appendLineRecord writes it, with values a push carries as they
// are (see jsonstr.Skip), and its number: such a record is the element
// of a push's lines, passed on neither decoded nor coded again. Any other
// record is left to decodeRecord.
func lineElem(rec []byte, times *jsonstr.Times) (seq int64, ok bool) {
	rest, ok := bytes.CutPrefix(rec, []byte(`{"seq":`))
	if !ok {
		return 0, false
	}
	i := 0
	for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
		if i == 18 {
			return 0, false
		}
		seq = seq*10 + int64(rest[i]-'0')
	}
	if seq == 0 || rest[0] == '0' {
		return 0, false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"ts":"`)); !ok {
		return 0, false
	}
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return 0, false
	}
	if _, ok := times.Parse(rest[:i]); !ok {
		return 0, false
	}
	rest = rest[i+1:]
	if r, ok := bytes.CutPrefix(rest, []byte(`,"stream":"stdout","line":`)); ok {
		rest = r
	} else if rest, ok = bytes.CutPrefix(rest, []byte(`,"stream":"stderr","line":`)); !ok {
		return 0, false
	}
	n, ok := jsonstr.Skip(rest)
	if !ok || string(rest[n:]) != "}" {
		return 0, false
	}
	return seq, true
}

// decodeRecord decodes any record of a segment.
func decodeRecord(raw []byte, rec *record) bool {
	return decodeLineRecord(raw, rec) || json.Unmarshal(raw, rec) == nil
}
