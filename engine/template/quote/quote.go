// Package quote makes a rendered script's template values data, never code.
// The renderer puts a unique sentinel where each {{ }} stood; Splice finds
// each sentinel's context in the script's language and replaces it with
// its value quoted for that context, and Check finds, before any value
// exists, the placeholders no quoting can make safe.
// It must not import engine, engine/workflow or engine/workspace.
package quote

import (
	"fmt"
	"strings"
)

// Lang is a script language as the workflow model normalises it.
type Lang string

// The languages a script may be written in.
const (
	Shell      Lang = "shell" // POSIX sh: bash, dash, busybox sh
	Python     Lang = "python"
	JavaScript Lang = "javascript"
	TypeScript Lang = "typescript"
	Go         Lang = "go"
)

// Problem is a placeholder in a context where no quoting is sound (or a
// value that cannot be quoted where it stands). Offset is the sentinel's
// byte offset in the text that was checked.
type Problem struct {
	Sentinel string
	Offset   int
	Message  string // why, and what to write instead (e.g. "$INPUT_NAME")
}

func (p Problem) Error() string { return p.Message }

// Splice returns src with each sentinel (a key of values) replaced by its
// value quoted for the context it stands in. values hold what a template
// expression yielded: a string, or for a placeholder that is exactly one
// expression the raw value (number, bool, nil, []any, map[string]any).
// A sentinel in a context where no quoting is sound is a Problem.
func Splice(lang Lang, src string, values map[string]any) (out string, err error) {
	s, ok := splicers[lang]
	if !ok {
		return "", fmt.Errorf("quote: unknown script language %q", lang)
	}
	// A parser fed with any script must not take the server down.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("quote: internal error reading the %s script: %v", lang, r)
		}
	}()
	return s.splice(src, values)
}

// Check reports each sentinel of src that stands where no quoting is
// sound, without values: the load-time check of a script whose {{ }}
// were replaced by sentinels.
func Check(lang Lang, src string, sentinels []string) (problems []Problem) {
	s, ok := splicers[lang]
	if !ok {
		return []Problem{{Message: fmt.Sprintf("unknown script language %q", lang)}}
	}
	defer func() {
		if r := recover(); r != nil {
			problems = []Problem{{Message: fmt.Sprintf("internal error reading the %s script: %v", lang, r)}}
		}
	}()
	return s.check(src, sentinels)
}

// splicer is one language's context finder.
type splicer interface {
	splice(src string, values map[string]any) (string, error)
	check(src string, sentinels []string) []Problem
}

// splicers holds one splicer per language; each language's file adds its own.
var splicers = map[Lang]splicer{}

// InputEnvName is the environment variable a worker sets for input field
// name, where a script reads it as data (the interface's rule: INPUT_ and
// the name upper-cased, anything but letters and digits as _).
func InputEnvName(name string) string {
	var b strings.Builder
	b.WriteString("INPUT_")
	for _, r := range strings.ToUpper(name) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
