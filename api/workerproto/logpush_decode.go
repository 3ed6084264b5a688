package workerproto

import (
	"bytes"
	"time"

	"github.com/appliance-sh/appliance/engine/jsonstr"
)

// A log push is the bulk of what remote workers send, and decoding it
// with encoding/json (reflection, a validating pre-scan, the time's own
// decoder) cost a third of the server's CPU per pushed line. DecodeFast
// decodes the pushes workers send by hand, and leaves every other body to
// encoding/json, so that each body means what encoding/json makes of it
// and every refusal is encoding/json's.
//
// It takes one JSON object of the fields below, each at most once and
// spelled exactly so (no escapes), with whitespace anywhere JSON allows
// it and null for any value (the zero value, as encoding/json leaves a
// field it sees once). It leaves to encoding/json: other fields (ignored
// there, matched to ours case-insensitively), a field twice (the last
// wins there, merged into the first in lines), a seq that is not a
// plain integer of int64, a ts with an escape, null in place of a line,
// anything after the object, and every malformed body.

// DecodeFast decodes body into p, which it sets only when it returns
// true; false leaves body to encoding/json (see above).
func (p *LogPush) DecodeFast(body []byte) bool {
	d := decoder{b: body}
	var out LogPush
	var seen [4]bool
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "worker_id":
			return !once(&seen[0]) && d.string(&out.WorkerID)
		case "step_name":
			return !once(&seen[1]) && d.string(&out.StepName)
		case "run":
			return !once(&seen[2]) && d.string(&out.Run)
		case "lines":
			return !once(&seen[3]) && d.lines(&out.Lines)
		}
		return false
	})
	if !ok || d.space() != len(body) {
		return false
	}
	*p = out
	return true
}

// once marks a field seen and tells whether it was seen before.
func once(seen *bool) bool {
	was := *seen
	*seen = true
	return was
}

// decoder reads a JSON body from b[i:].
type decoder struct {
	b     []byte
	i     int
	times jsonstr.Times // the lines' times mostly share their second
}

// space skips JSON whitespace and returns where it ends.
func (d *decoder) space() int {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return d.i
		}
	}
	return d.i
}

// peek is the next byte after whitespace, 0 at the end.
func (d *decoder) peek() byte {
	if d.space() == len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// null reads a null if one comes next.
func (d *decoder) null() bool {
	if d.peek() != 'n' || len(d.b)-d.i < 4 || string(d.b[d.i:d.i+4]) != "null" {
		return false
	}
	d.i += 4
	return true
}

// object reads an object, calling field for each key with d just past
// its colon; field reads the value.
func (d *decoder) object(field func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.i++
	if d.peek() == '}' {
		d.i++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.plainKey()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !field(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// plainKey reads a key without escapes or control characters; the keys
// it does not know are refused anyway.
func (d *decoder) plainKey() ([]byte, bool) {
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			key := d.b[d.i+1 : j]
			d.i = j + 1
			return key, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// string reads a string, or null, into s.
func (d *decoder) string(s *string) bool {
	if d.null() {
		return true
	}
	if d.peek() != '"' {
		return false
	}
	v, n, ok := jsonstr.ReadString(d.b[d.i:])
	if !ok {
		return false
	}
	d.i += n
	*s = v
	return true
}

// stream reads a line's stream: the two a worker sends need no copy.
func (d *decoder) stream(s *string) bool {
	d.space()
	rest := d.b[d.i:]
	for _, name := range [...]string{Stdout, Stderr} {
		if len(rest) > len(name)+1 && rest[0] == '"' && string(rest[1:len(name)+1]) == name && rest[len(name)+1] == '"' {
			*s = name
			d.i += len(name) + 2
			return true
		}
	}
	return d.string(s)
}

// lines reads the array of lines, or null.
func (d *decoder) lines(lines *[]LogLine) bool {
	if d.null() {
		return true
	}
	if d.peek() != '[' {
		return false
	}
	d.i++
	// Sized once for the lines the body seems to hold (each but the last
	// followed by "},{"; a line's text may hold it too, so the count is
	// bounded as a push is), rather than grown by doubling: the slices
	// given up were most of what a server allocated taking pushes.
	out := make([]LogLine, 0, min(bytes.Count(d.b[d.i:], []byte("},{"))+1, MaxPushLines)) // [] is an empty array, not none
	if d.peek() == ']' {
		d.i++
		*lines = out
		return true
	}
	for {
		out = append(out, LogLine{})
		if !d.line(&out[len(out)-1]) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			*lines = out
			return true
		default:
			return false
		}
	}
}

// line reads one line's object.
func (d *decoder) line(l *LogLine) bool {
	var seen [4]bool
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "seq":
			return !once(&seen[0]) && d.int(&l.Seq)
		case "ts":
			return !once(&seen[1]) && d.time(&l.TS)
		case "stream":
			return !once(&seen[2]) && d.stream(&l.Stream)
		case "line":
			return !once(&seen[3]) && d.string(&l.Line)
		}
		return false
	})
}

// int reads an integer of int64 without fraction or exponent (as
// encoding/json's strconv.ParseInt takes it), or null.
func (d *decoder) int(n *int64) bool {
	if d.null() {
		return true
	}
	j, neg := d.i, false
	if j < len(d.b) && d.b[j] == '-' {
		neg = true
		j++
	}
	start := j
	var v uint64
	for ; j < len(d.b) && '0' <= d.b[j] && d.b[j] <= '9'; j++ {
		if j-start == 18 { // 19 digits may overflow: leave them to encoding/json
			return false
		}
		v = v*10 + uint64(d.b[j]-'0')
	}
	// JSON has no leading zeros; a fraction or exponent ends the digits
	// and is refused by whatever reads next.
	if j == start || (d.b[start] == '0' && j-start > 1) {
		return false
	}
	*n = int64(v)
	if neg {
		*n = -*n
	}
	d.i = j
	return true
}

// time reads an RFC 3339 timestamp with time.Time's own decoder, given
// the same bytes encoding/json gives it, or null.
func (d *decoder) time(t *time.Time) bool {
	if d.null() {
		return true
	}
	if d.peek() != '"' {
		return false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			v, ok := d.times.Parse(d.b[d.i+1 : j])
			if !ok {
				return false
			}
			*t = v
			d.i = j + 1
			return true
		case c == '\\' || c < 0x20:
			return false
		}
	}
	return false
}
