package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// tricky are strings whose encoding or decoding has a rule of its own.
var tricky = []string{
	"", "plain text", `quote " and backslash \`, "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "<html> & </html>", "snow ☃ and 🎉",
	"line\u2028para\u2029", "bad \xff byte", "cut \xe2\x98", "surrogate \xed\xa0\x80 bytes",
	"\\u00e9 stays text", "/slash/",
}

// encodingJSON is s as the log files have always had it.
func encodingJSON(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := AppendString([]byte("x"), s), append([]byte("x"), encodingJSON(t, s)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
	})
}

func FuzzReadString(f *testing.F) {
	for _, s := range tricky {
		f.Add(string(encodingJSON(f, s)) + `,"next"`)
	}
	for _, s := range []string{
		`"\u00e9\u00E9"`, `"\ud83c\udf89"`, `"\ud83c"`, `"\udf89\ud83c"`, `"\ud83c\u0041"`,
		`"\ud83c\ud83c\udf89"`, `"\/\b\f\n\r\t\"\\"`, `"\'"`, `"\x"`, `"\u12"`, `"\u12g4"`,
		"\"raw\ttab\"", `"no end`, `"ends in \`, `"\u`, "\"\xff\"", "\"\xed\xa0\x80\"", `""`, `x`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, n, ok := ReadString([]byte(in))
		var want string
		// The string ReadString says it read is the value encoding/json
		// decodes; when it reads none, no prefix of in is a JSON string
		// (in starting with its quote: encoding/json skips whitespace
		// before a value, ReadString's caller does).
		if ok {
			if err := json.Unmarshal([]byte(in[:n]), &want); err != nil {
				t.Fatalf("ReadString(%q) read %q, encoding/json refuses %q: %v", in, s, in[:n], err)
			}
			if s != want {
				t.Fatalf("ReadString(%q) = %q, encoding/json decodes %q", in, s, want)
			}
			return
		}
		if !strings.HasPrefix(in, `"`) {
			return
		}
		for end := 1; end <= len(in); end++ {
			if in[end-1] == '"' && json.Unmarshal([]byte(in[:end]), &want) == nil {
				t.Fatalf("ReadString(%q) refused it, encoding/json decodes its prefix %q as %q", in, in[:end], want)
			}
		}
	})
}

// Skip passes over exactly the strings any JSON reader takes as they
// are: where it says ok, ReadString reads the same length and the bytes
// are valid JSON and UTF-8; where it does not, they are not both.
func FuzzSkip(f *testing.F) {
	for _, s := range tricky {
		f.Add(string(encodingJSON(f, s)) + `}`)
	}
	for _, s := range []string{`"\u00e9\ud83c\udf89"`, `"\ud83c"`, `"\x"`, `"\u12g4"`, "\"raw\ttab\"", `"no end`, "\"\xff\"", `""`, `x`, "\"ok\"tail"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, ok := Skip([]byte(in))
		_, rn, rok := ReadString([]byte(in))
		if ok {
			if !rok || rn != n {
				t.Fatalf("Skip(%q) = %d, ReadString reads %d (ok %v)", in, n, rn, rok)
			}
			if !json.Valid([]byte(in[:n])) || !utf8.ValidString(in[:n]) {
				t.Fatalf("Skip(%q) passed %q: not valid JSON and UTF-8", in, in[:n])
			}
			return
		}
		if rok && json.Valid([]byte(in[:rn])) && utf8.ValidString(in[:rn]) {
			t.Fatalf("Skip(%q) refused %q, valid JSON and UTF-8", in, in[:rn])
		}
	})
}

// A string written by AppendString reads back as itself, when it is
// valid UTF-8.
func TestAppendStringReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", "tab\tquote\"back\\", "\x00\x1f", "☃🎉", "\u2028\u2029", "a\u00e9b"} {
		b := AppendString(nil, s)
		got, n, ok := ReadString(b)
		if !ok || n != len(b) || got != s {
			t.Errorf("ReadString(AppendString(%q)) = %q, %d, %v; want it back, %d bytes", s, got, n, ok, len(b))
		}
	}
}

// plain8 is exact for every byte at every place, beside any other byte
// (a borrow from one byte must not hide or fake another).
func TestPlain8(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for p := range 8 {
		for q := p + 1; q < 8; q++ {
			for a := range 256 {
				for b := range 256 {
					word := []byte("abcdefgh")
					word[p], word[q] = byte(a), byte(b)
					if got, want := plain8(load8(word, 0)), plain(byte(a)) && plain(byte(b)); got != want {
						t.Fatalf("plain8(%q) = %v, want %v", word, got, want)
					}
				}
			}
		}
	}
}

// Escaping allocates nothing beyond dst's growth, text with characters
// past ASCII and bytes that are not UTF-8 included, from a string or
// from bytes.
func TestAppendEscapedAllocatesNothing(t *testing.T) {
	s := "héllo \u2028 wörld \xff\"\\\n" + strings.Repeat("plain ascii ", 8)
	dst := make([]byte, 0, 4*len(s))
	if n := testing.AllocsPerRun(100, func() { dst = AppendString(dst[:0], s) }); n != 0 {
		t.Errorf("AppendString: %v allocations a call", n)
	}
	b := []byte(s)
	if n := testing.AllocsPerRun(100, func() { dst = AppendEscaped(dst[:0], b) }); n != 0 {
		t.Errorf("AppendEscaped of bytes: %v allocations a call", n)
	}
	if got, want := string(AppendEscaped(nil, b)), string(AppendString(nil, s)); `"`+got+`"` != want {
		t.Errorf("AppendEscaped(bytes) = %s, AppendString = %s", got, want)
	}
}

// Times writes what time.RFC3339Nano writes and reads what encoding/json
// reads, to the same value, whatever second it remembers.
func FuzzTimes(f *testing.F) {
	f.Add(int64(1795832694), int64(859745123), int64(1795832694), "2026-11-28T02:24:54.5Z")
	f.Add(int64(1795832694), int64(0), int64(1795832695), "2026-11-28T02:24:54Z")
	f.Add(int64(-62135596800), int64(100), int64(0), "0001-01-01T00:00:00.000000001Z")
	f.Add(int64(253402300800), int64(5), int64(253402300799), "2026-11-28T02:24:54.1234567891Z")
	f.Add(int64(1795832694), int64(10), int64(1795832694), "2026-11-28T02:24:54.Z")
	f.Add(int64(1795832694), int64(10), int64(1795832694), "2026-11-28T02:24:54.5+01:00")
	f.Fuzz(func(t *testing.T, sec, ns, seen int64, text string) {
		var c Times
		c.Append(nil, time.Unix(seen, 0).UTC()) // a second remembered
		for _, tm := range []time.Time{time.Unix(sec, ns).UTC(), time.Unix(sec, ns).In(time.FixedZone("x", 3600))} {
			got, want := c.Append([]byte("x"), tm), tm.AppendFormat([]byte("x"), time.RFC3339Nano)
			if string(got) != string(want) {
				t.Fatalf("Append(%v) = %s, want %s", tm, got, want)
			}
		}
		for range 2 { // the second time, with text's second remembered
			got, ok := c.Parse([]byte(text))
			var want time.Time
			err := json.Unmarshal([]byte(`"`+text+`"`), &want)
			// A zone other than UTC is a new FixedZone each time: the same
			// name and offset.
			gn, goff := got.Zone()
			wn, woff := want.Zone()
			same := got == want || want.Location() != time.UTC && got.Equal(want) && gn == wn && goff == woff
			if ok != (err == nil) || ok && !same {
				t.Fatalf("Parse(%q) = %v, %v; encoding/json reads %v, %v", text, got, ok, want, err)
			}
		}
	})
}
