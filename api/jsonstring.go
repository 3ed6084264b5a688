package api

import (
	"bufio"
	"unicode/utf8"
)

// jsonString writes the bytes it is given as the inside of a JSON string,
// escaped as an encoding/json Encoder with SetEscapeHTML(false) escapes
// them, as the log files are written (<, > and & stay readable; invalid
// UTF-8 becomes U+FFFD), in any number of writes: a character split
// between two writes is held until the next. end writes what is still
// held.
type jsonString struct {
	w       *bufio.Writer
	pending [utf8.UTFMax]byte
	held    int
}

const hexDigits = "0123456789abcdef"

func (j *jsonString) Write(p []byte) (int, error) {
	n := len(p)
	for j.held > 0 && len(p) > 0 {
		j.pending[j.held] = p[0]
		j.held++
		p = p[1:]
		if utf8.FullRune(j.pending[:j.held]) {
			j.held = copy(j.pending[:], j.escape(j.pending[:j.held]))
		}
	}
	if len(p) > 0 {
		j.held = copy(j.pending[:], j.escape(p))
	}
	return n, nil
}

// end writes each byte of an unfinished character as U+FFFD, as
// encoding/json does.
func (j *jsonString) end() {
	for range j.held {
		j.w.WriteString(`\ufffd`)
	}
	j.held = 0
}

// escape writes p escaped and returns the start of a character it ends in
// the middle of.
func (j *jsonString) escape(p []byte) []byte {
	start := 0
	for i := 0; i < len(p); {
		b := p[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			j.w.Write(p[start:i])
			switch b {
			case '"', '\\':
				j.w.WriteByte('\\')
				j.w.WriteByte(b)
			case '\n':
				j.w.WriteString(`\n`)
			case '\r':
				j.w.WriteString(`\r`)
			case '\t':
				j.w.WriteString(`\t`)
			case '\b':
				j.w.WriteString(`\b`)
			case '\f':
				j.w.WriteString(`\f`)
			default:
				j.w.WriteString(`\u00`)
				j.w.WriteByte(hexDigits[b>>4])
				j.w.WriteByte(hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		if !utf8.FullRune(p[i:]) {
			j.w.Write(p[start:i])
			return p[i:]
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			j.w.Write(p[start:i])
			j.w.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not valid JavaScript source; encoding/json
			// escapes them too.
			j.w.Write(p[start:i])
			j.w.WriteString(`\u202`)
			j.w.WriteByte(hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	j.w.Write(p[start:])
	return nil
}
