// Package jsonstr writes, reads and checks JSON strings (and the times
// JSON carries as strings, see Times) exactly as encoding/json does,
// without reflection, for the few hot paths that encode or decode a
// record by hand (log lines pushed by workers, the log files, a log read
// as one string, a worker's spool). It is a leaf: it imports only the standard library.
package jsonstr

import (
	"unicode/utf16"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, byte for byte as an
// encoding/json Encoder with SetEscapeHTML(false) writes it: <, > and &
// stay readable, invalid UTF-8 becomes \ufffd, and U+2028 and U+2029 are
// escaped (valid JSON, but not valid JavaScript source).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendEscaped(dst, s)
	return append(dst, '"')
}

// AppendEscaped appends s escaped as the inside of a JSON string, as
// AppendString writes it between its quotes: for text that arrives in
// pieces (a log streamed into one string), each cut between characters.
func AppendEscaped[S string | []byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plain8(load8(s, i)) {
			i += 8
		}
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		// At most 4 bytes: a string's copy stays on the stack.
		r, size := utf8.DecodeRune([]byte(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// ReadString reads the JSON string b starts with (b[0] is its opening
// quote) and returns its value as encoding/json decodes it: every escape
// undone (a \u surrogate pair makes one character, a lone surrogate
// U+FFFD) and invalid UTF-8 turned into U+FFFD. n is the length of the
// string in b, quotes included; ok is false when b does not start with a
// valid JSON string (a raw control character, a bad escape, no end).
func ReadString(b []byte) (s string, n int, ok bool) {
	i, ok := plainRun(b)
	if !ok {
		return "", 0, false
	}
	// Most strings need no unescaping: they are a slice of b, copied once.
	if b[i] == '"' {
		return string(b[1:i]), i + 1, true
	}
	// Sized for a short escaped tail (b may run on far past the string:
	// the rest of a request's body), grown as needed.
	out, n, ok := unquote(append(make([]byte, 0, i-1+64), b[1:i]...), b, i)
	if !ok {
		return "", 0, false
	}
	return string(out), n, true
}

// plainRun returns where the string b starts with stops being copied as
// it is: the index of its closing quote, or of the first byte to unquote
// (an escape, a control character, a byte that is not UTF-8); false when
// b starts with no string, or it has no end.
func plainRun(b []byte) (int, bool) {
	if len(b) == 0 || b[0] != '"' {
		return 0, false
	}
	return plainFrom(b, 1)
}

// plainFrom is plainRun from i, inside the string.
func plainFrom(b []byte, i int) (int, bool) {
	for i < len(b) {
		for i+8 <= len(b) && plain8(load8(b, i)) {
			i += 8
		}
		if i == len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			return i, true
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, true
			}
			i += size
		}
	}
	return 0, false
}

// Skip returns the length, quotes included, of the JSON string b starts
// with, without decoding it: for a string passed on as it is. ok is false
// unless it is valid JSON and valid UTF-8 (what any JSON reader takes as
// it is), so bytes that would have to be repaired are left to ReadString.
func Skip(b []byte) (n int, ok bool) {
	i, ok := plainRun(b)
	for ok {
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if u4(b[i:]) < 0 {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default: // a control character, or a byte that is not UTF-8
			return 0, false
		}
		i, ok = plainFrom(b, i)
	}
	return 0, false
}

// unquote appends to out the rest of the string b starts with from i,
// the first byte that is not copied as it is, the way encoding/json's
// unquote does, and returns the length of the string in b.
func unquote(out, b []byte, i int) ([]byte, int, bool) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return out, i + 1, true
		case c < 0x20:
			return nil, 0, false
		case c == '\\':
			if i+1 >= len(b) {
				return nil, 0, false
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := u4(b[i:])
				if r < 0 {
					return nil, 0, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if pair := utf16.DecodeRune(r, u4(b[i:])); pair != utf8.RuneError {
						out = utf8.AppendRune(out, pair)
						i += 6
						continue
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, 0, false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			out = utf8.AppendRune(out, r) // U+FFFD for an invalid byte
			i += size
		}
	}
	return nil, 0, false
}

// u4 is the character of the \uXXXX escape b starts with, or -1.
func u4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// Log lines are mostly plain ASCII, so strings are scanned 8 bytes at a
// time for the bytes that need a look: a byte-at-a-time loop was most of
// the cost of a line.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plain8 tells whether each of the 8 bytes in x is ASCII from 0x20 on
// and neither a quote nor a backslash: a byte copied as it is both ways.
func plain8(x uint64) bool {
	return (below(x, 0x20) | below(x^('"'*ones), 1) | below(x^('\\'*ones), 1) | x&highs) == 0
}

// below is not zero exactly when some byte of x is less than n (at most
// 0x80): subtracting n sets the high bit of such a byte, and of no byte
// that had it clear before, unless a lower byte borrowed, itself below n.
func below(x, n uint64) uint64 {
	return (x - n*ones) &^ x & highs
}

// load8 is the 8 bytes of s from i, the first in the low byte.
func load8[S string | []byte](s S, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}
