package api

import (
	"bufio"
	"unicode/utf8"

	"github.com/appliance-sh/appliance/engine/jsonstr"
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
	scratch []byte // the escaped text of a write
}

// maxScratch bounds the scratch kept between writes.
const maxScratch = 64 << 10

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
// the middle of: only its last bytes can be one (a character is at most
// utf8.UTFMax bytes, and a byte that starts one never lies inside another).
func (j *jsonString) escape(p []byte) []byte {
	cut := len(p)
	for k := max(0, len(p)-utf8.UTFMax+1); k < len(p); k++ {
		if p[k] >= utf8.RuneSelf && !utf8.FullRune(p[k:]) {
			cut = k
			break
		}
	}
	j.scratch = jsonstr.AppendEscaped(j.scratch[:0], p[:cut])
	j.w.Write(j.scratch)
	if cap(j.scratch) > maxScratch {
		j.scratch = nil // one big write's: not kept for the next
	}
	return p[cut:]
}
