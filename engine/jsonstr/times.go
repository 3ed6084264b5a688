package jsonstr

import "time"

// Times writes and reads times as encoding/json does (RFC 3339 with the
// nanoseconds' significant digits), remembering the text of the last
// second it wrote or read: a log's lines mostly share theirs, and
// formatting or parsing the date and clock of each was a tenth of the
// CPU a pushed line cost. The zero value is ready; it is not safe for
// concurrent use.
type Times struct {
	sec  int64  // the Unix second of text (valid while text is set)
	text []byte // "2006-01-02T15:04:05" of sec, UTC
	base time.Time
}

const secondLayout = "2006-01-02T15:04:05"

// Append appends t as time.RFC3339Nano, unquoted.
func (c *Times) Append(dst []byte, t time.Time) []byte {
	if t.Location() != time.UTC {
		return t.AppendFormat(dst, time.RFC3339Nano)
	}
	if sec := t.Unix(); c.text == nil || sec != c.sec {
		if y := t.Year(); y < 0 || y > 9999 {
			return t.AppendFormat(dst, time.RFC3339Nano)
		}
		c.text = t.AppendFormat(c.text[:0], secondLayout)
		c.sec, c.base = sec, time.Unix(sec, 0).UTC()
	}
	dst = append(dst, c.text...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := 10
		for frac[n-1] == '0' {
			n--
		}
		dst = append(dst, frac[:n]...)
	}
	return append(dst, 'Z')
}

// Parse reads b, the text of a JSON string holding a time (without its
// quotes), as encoding/json does; false if encoding/json refuses it.
func (c *Times) Parse(b []byte) (time.Time, bool) {
	if len(b) > len(secondLayout) && c.text != nil && string(b[:len(secondLayout)]) == string(c.text) {
		rest := b[len(secondLayout):]
		ns, digits := 0, 0
		if rest[0] == '.' {
			for digits < 9 && 1+digits < len(rest) && '0' <= rest[1+digits] && rest[1+digits] <= '9' {
				ns = ns*10 + int(rest[1+digits]-'0')
				digits++
			}
			if digits == 0 {
				return time.Time{}, false
			}
			rest = rest[1+digits:]
			for range 9 - digits {
				ns *= 10
			}
		}
		if string(rest) == "Z" {
			return c.base.Add(time.Duration(ns)), true
		}
	}
	var t time.Time
	q := make([]byte, 0, len(b)+2)
	if t.UnmarshalJSON(append(append(append(q, '"'), b...), '"')) != nil {
		return time.Time{}, false
	}
	if u := t.UTC(); t.Location() == time.UTC && u.Year() >= 0 && u.Year() <= 9999 {
		c.text = u.AppendFormat(c.text[:0], secondLayout)
		c.sec, c.base = u.Unix(), time.Unix(u.Unix(), 0).UTC()
	}
	return t, true
}
