package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestJSONStringEscapesLikeEncodingJSONWhateverTheWrites checks the
// streaming escaper against encoding/json on text with quotes, control
// characters, multi-byte and invalid UTF-8, cut into writes at every point.
func TestJSONStringEscapesLikeEncodingJSONWhateverTheWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{
		[]byte(`plain "quoted" back\slash` + "\n\t\r\x00\x1f\x7f"),
		[]byte("héllo wörld € 𝄞 \u2028 \u2029 <a&b>"),
		{0xe2, 0x82},             // a character cut short at the end
		{0xe2, 'a', 0xf0, 0xe2},  // invalid starts
		{0xff, 0xfe, 0x80, 0xc0}, // bytes that start nothing
	}
	for range 50 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		inputs = append(inputs, b, []byte(string(bytes.Runes(b))))
	}
	for _, in := range inputs {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(in)); err != nil {
			t.Fatal(err)
		}
		wantInner := want.String()[1 : want.Len()-2] // drop the quotes and newline
		for cut1 := 0; cut1 <= len(in); cut1++ {
			cut2 := cut1 + rng.IntN(len(in)-cut1+1)
			var got bytes.Buffer
			bw := bufio.NewWriter(&got)
			s := jsonString{w: bw}
			for _, part := range [][]byte{in[:cut1], in[cut1:cut2], in[cut2:]} {
				s.Write(part)
			}
			s.end()
			bw.Flush()
			if got.String() != wantInner {
				t.Fatalf("escape %q cut at %d,%d = %s, want %s", in, cut1, cut2, got.String(), wantInner)
			}
		}
	}
}
