package template

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// ErrUndefined is wrapped by every error about a variable, attribute or
// item that does not exist.
var ErrUndefined = errors.New("undefined variable")

// maxQuoted bounds how much of a template an error message quotes: scripts
// can be long, and the start is enough to find them.
const maxQuoted = 80

var (
	// gonja flattens an error that passes through a filter into text, so
	// these match anywhere in the message.
	undefinedName = regexp.MustCompile(`Unable to evaluate name "([^"]*)"`)
	undefinedPath = regexp.MustCompile(`(?i:unable to evaluate) ([^\s:]+): (?:attribute '[^']*'|item .*?) not found`)
	lineNumber    = regexp.MustCompile(`(?i)at line (\d+)`)
	// Each nested call wraps the error again, past where rootCause digs.
	macroTooDeep = regexp.MustCompile(`macro "[^"]*": calls nest deeper than \d+`)
	// An attribute or item read of None (a step's output that is null).
	noneRead = regexp.MustCompile(`(?i:unable to evaluate) ([^\s:]+): Can't use \w+ on None`)
)

// RefError is a render that failed reading what is not there: an
// undefined variable, attribute or item, or an attribute or item of None.
// Expr is the expression as gonja names it (`say_hello.output.greeting`,
// `say_hello.output['greeting']`), for a caller that knows what its
// variables stand for to say why; the error reads as before.
type RefError struct {
	Expr string
	err  error
}

func (e *RefError) Error() string { return e.err.Error() }
func (e *RefError) Unwrap() error { return e.err }

// templateError names the template (its start) and, for multi-line ones,
// the line, then says what failed in gonja's innermost words, or as
// `undefined variable "input.nme"` when a variable is missing. A failed
// read of something not there is a *RefError.
func templateError(src string, err error) error {
	out := describeError(src, err)
	var expr string
	if m := undefinedName.FindStringSubmatch(err.Error()); m != nil {
		expr = m[1]
	} else if m := undefinedPath.FindStringSubmatch(err.Error()); m != nil {
		expr = m[1]
	} else if m := noneRead.FindStringSubmatch(err.Error()); m != nil {
		expr = m[1]
	}
	if expr == "" || macroTooDeep.MatchString(err.Error()) {
		return out
	}
	return &RefError{Expr: expr, err: out}
}

// describeError words templateError's message.
func describeError(src string, err error) error {
	where := fmt.Sprintf("template %s", quote(src))
	if strings.Contains(src, "\n") {
		if m := lineNumber.FindStringSubmatch(err.Error()); m != nil {
			where += " line " + m[1]
		}
	}
	if m := macroTooDeep.FindString(err.Error()); m != "" {
		return fmt.Errorf("%s: %s", where, m)
	}
	cause := rootCause(err)
	msg := cause.Error()
	if m := undefinedName.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s: %w %q", where, ErrUndefined, m[1])
	}
	if m := undefinedPath.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("%s: %w %q", where, ErrUndefined, m[1])
	}
	if strings.HasPrefix(msg, textFilterCall) {
		return fmt.Errorf("%s: %s", where, strings.TrimPrefix(msg, textFilterCall))
	}
	return fmt.Errorf("%s: %w", where, cause)
}

// minScrubbed is the shortest value scrubValues hides: shorter ones read
// as the message's own words, and hold no secret.
const minScrubbed = 4

// scrubbed stands for a value in an error message.
const scrubbed = "***"

// scrubValues keeps a failed render's values out of its error: gonja
// writes the values it failed on into its messages (a map a method was
// called on, an argument it refused), and an error travels further than
// the render (a step's error_message, a workspace's load errors), so each
// string among vars that the message holds is replaced by ***, as the log
// masks secrets. The message keeps the template's source: its expressions.
func scrubValues(err error, vars map[string]any) error {
	msg := err.Error()
	var values []string
	collectStrings(vars, &values, 0)
	// Longest first, so a value that contains another goes whole.
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	scrubbedMsg := msg
	for _, v := range values {
		scrubbedMsg = strings.ReplaceAll(scrubbedMsg, v, scrubbed)
	}
	if scrubbedMsg == msg {
		return err
	}
	return &scrubbedError{msg: scrubbedMsg, err: err}
}

// scrubbedError reads as the scrubbed message and still wraps the cause,
// so errors.Is finds ErrUndefined and the limits.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// collectStrings gathers the strings of v worth scrubbing, to a depth
// where no template's variables go.
func collectStrings(v any, out *[]string, depth int) {
	if depth > 64 {
		return
	}
	switch t := v.(type) {
	case string:
		if len(t) >= minScrubbed {
			*out = append(*out, t)
		}
	case map[string]any:
		for _, item := range t {
			collectStrings(item, out, depth+1)
		}
	case []any:
		for _, item := range t {
			collectStrings(item, out, depth+1)
		}
	case map[string]string:
		for _, item := range t {
			collectStrings(item, out, depth+1)
		}
	case []string:
		for _, item := range t {
			collectStrings(item, out, depth+1)
		}
	}
}

// textFilterCall prefixes errors passing through textFilter, which users
// never wrote.
const textFilterCall = "invalid call to filter '" + textFilter + "': "

// parseError drops gonja's wrapper, which quotes the whole source again.
func parseError(src string, err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		err = inner
	}
	if strings.Contains(err.Error(), "unclosed comment") {
		return fmt.Errorf("template %s: %w (\"{#\" opens a template comment: write shell's ${#x} as ${{ '{#' }}x} or wrap the text in {%% raw %%}...{%% endraw %%})", quote(src), err)
	}
	return fmt.Errorf("template %s: %w", quote(src), err)
}

// rootCause digs through gonja's wrapping (pkg/errors wrappers around
// *exec.Value holding the error) down to the first error raised.
func rootCause(err error) error {
	for range 100 {
		if v, ok := err.(*exec.Value); ok {
			inner, isErr := v.Interface().(error)
			if !isErr || inner == err {
				return err
			}
			err = inner
			continue
		}
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
	return err
}

func quote(src string) string {
	if utf8.RuneCountInString(src) <= maxQuoted {
		return fmt.Sprintf("%q", src)
	}
	runes := []rune(src)
	return fmt.Sprintf("%q", string(runes[:maxQuoted])+"…")
}

// recoverError turns a panic inside gonja into an error: no template, however
// broken, may take the server down.
func recoverError(src string, errp *error) {
	if r := recover(); r != nil {
		*errp = fmt.Errorf("template %s: internal error: %v", quote(src), r)
	}
}
