package template

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// lexTrap finds where gonja's lexer (v2.9.1, the newest) misreads src: in
// a tag, outside a string, an ASCII digit, a '.', then a character of
// more than one byte. Having peeked at that character, the lexer steps
// back over the dot by the character's width rather than the dot's, and
// then panics or, as fuzzing found, loops forever: a template that hangs
// whatever reads it. Such text is no expression Jinja reads either (a
// number's attribute), but for an identifier ending in a digit (x1.é),
// which the check takes for a number too. It returns the dot's byte
// offset, or -1.
func lexTrap(src string) int {
	inTag := false
	var quote byte // the quote of a string literal in a tag
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case !inTag:
			if c != '{' || i+1 == len(src) {
				continue
			}
			switch src[i+1] {
			case '{', '%':
				inTag = true
				i++
			case '#': // a comment, to its "#}" (unclosed: a parse error)
				end := strings.Index(src[i+2:], "#}")
				if end < 0 {
					return -1
				}
				i += 2 + end + 1
			}
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case (c == '}' || c == '%') && i+1 < len(src) && src[i+1] == '}':
			inTag = false
			i++
		case c >= '0' && c <= '9' && i+2 < len(src) && src[i+1] == '.' && src[i+2] >= utf8.RuneSelf:
			return i + 1
		}
	}
	return -1
}

// lexTrapError is Parse's error for a template lexTrap refuses.
func lexTrapError(src string, at int) error {
	line, col := 1, 1
	for _, r := range src[:at] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	next, _ := utf8.DecodeRuneInString(src[at+1:])
	return fmt.Errorf("template %s: a digit, '.' and %q cannot be read here (the template library would hang on it); for an attribute write x1[%q] (Line: %d Col: %d)",
		quote(src), next, string(next), line, col)
}
