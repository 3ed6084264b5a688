package worker

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/appliance-sh/appliance/engine/jsonstr"
	"github.com/appliance-sh/appliance/runners"
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

// decodeLineRecord reads a log line's record as appendLineRecord wrote
// it; false when raw is anything else (left to encoding/json). times
// remembers the second of the records read before.
func decodeLineRecord(raw []byte, times *jsonstr.Times, rec *record) bool {
	p, ok := parseLineRecord(bytes.TrimRight(raw, "\n"), times)
	if !ok {
		return false
	}
	line, _, _ := jsonstr.ReadString(p.line) // valid: see parseLineRecord
	*rec = record{Seq: p.seq, TS: p.ts, Stream: p.stream, Line: line}
	return true
}

// lineParts are the parts of a line's record.
type lineParts struct {
	seq    int64
	ts     time.Time
	stream string
	line   []byte // its JSON string, quotes included
}

// parseLineRecord finds the parts of rec, a record without its newline,
// when it is a log line as appendLineRecord writes it, numbered, with
// values any JSON reader takes as they are (see jsonstr.Skip): such a
// record is also the element of a push's lines, passed on neither decoded
// nor coded again. Any other record is left to encoding/json.
func parseLineRecord(rec []byte, times *jsonstr.Times) (p lineParts, ok bool) {
	rest, ok := bytes.CutPrefix(rec, []byte(`{"seq":`))
	if !ok {
		return p, false
	}
	i := 0
	for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
		if i == 18 {
			return p, false
		}
		p.seq = p.seq*10 + int64(rest[i]-'0')
	}
	if p.seq == 0 || rest[0] == '0' {
		return p, false
	}
	if rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"ts":"`)); !ok {
		return p, false
	}
	if i = bytes.IndexByte(rest, '"'); i < 0 {
		return p, false
	}
	if p.ts, ok = times.Parse(rest[:i]); !ok {
		return p, false
	}
	rest = rest[i+1:]
	for _, stream := range [...]string{runners.Stdout, runners.Stderr} {
		if r, ok := bytes.CutPrefix(rest, []byte(`,"stream":"`+stream+`","line":`)); ok {
			p.stream, rest = stream, r
			break
		}
	}
	if p.stream == "" {
		return p, false
	}
	n, ok := jsonstr.Skip(rest)
	if !ok || string(rest[n:]) != "}" {
		return p, false
	}
	p.line = rest[:n]
	return p, true
}

// decodeRecord decodes any record of a segment; times remembers the
// second of the records read before (a segment's lines mostly share it).
func decodeRecord(raw []byte, times *jsonstr.Times, rec *record) bool {
	return decodeLineRecord(raw, times, rec) || json.Unmarshal(raw, rec) == nil
}
