package template

import (
	"fmt"
	"strings"
	"testing"
	"time"

	quoting "github.com/appliance-sh/appliance/engine/template/quote"
)

// gonja's lexer (v2.9.1) loops forever or panics on a number, a '.' and a
// character of more than one byte in a tag (fuzzing found the loop:
// testdata/fuzz/FuzzParse/number-dot-wide-rune-hang). Every reader of a
// template refuses such a source, or passes it by, rather than hang.
func TestANumberDotAndAWideCharacterIsRefusedNotHung(t *testing.T) {
	for _, src := range []string{
		"{{\x142.ﲢ", // the fuzzer's, cut down: loops forever
		"{{ 2.ﲢ }}", // panics
		"echo {{ x }} {% if 1.5.中 %}y{% endif %}",
		"{{ 1e5.😀 }}",
		"{{ x1.é }}", // an identifier: refused too, with a way round
		"{{ 'a' ~ \"}}\" ~ 2.中 }}",
	} {
		defer time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("%q: no answer after 10s", src)) }).Stop()
		_, err := Parse(src)
		if err == nil || !strings.Contains(err.Error(), "would hang") || !strings.Contains(err.Error(), "(Line: 1 Col: ") {
			t.Errorf("Parse(%q): %v, want it refused with its position", src, err)
		}
		if _, err := References(src); err == nil {
			t.Errorf("References(%q): no error", src)
		}
		if tags := Tags(src); len(tags) != 0 {
			t.Errorf("Tags(%q): %v, want none (Parse refuses it)", src, tags)
		}
		_ = CheckScript(src, quoting.Shell)
	}
	// The same characters where the lexer reads no number.
	for _, src := range []string{
		"price 2.中 {{ x }}",   // text
		"{{ '2.中' ~ x }}",     // a string
		"{# 2.中 #}{{ x }}",    // a comment
		"{{ x.é }} {{ 2.5 }}", // an attribute; a float
		"{{ 2.e }}",           // ASCII after the '.'
	} {
		if _, err := Parse(src); err != nil && strings.Contains(err.Error(), "would hang") {
			t.Errorf("Parse(%q) refused: %v", src, err)
		}
	}
}
