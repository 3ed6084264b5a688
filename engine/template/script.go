package template

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/tokens"

	quoting "github.com/appliance-sh/appliance/engine/template/quote"
	"github.com/appliance-sh/appliance/engine/template/valuetext"
)

// A script's {{ }} values are data, never code. RenderScript renders the
// script with a sentinel in place of each value, keeps the values, and
// has quoting.Splice replace each sentinel with its value quoted for the
// context it stands in (a shell word, a Python string...). CheckScript
// does the same at load time without values, to refuse the placeholders
// no quoting can make safe.

// marks are the {{ }} values of one script render, by sentinel.
type marks struct {
	prefix string         // "aq" + a random nonce + "q": no template or value can guess it
	values map[string]any // sentinel → the expression's value
	at     map[string]int // sentinel → the byte offset of its {{ in the template
}

func newMarks() *marks {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return &marks{prefix: "aq" + hex.EncodeToString(nonce[:]) + "q", values: map[string]any{}, at: map[string]int{}}
}

// add keeps x, the value of the {{ }} at offset pos, and returns the
// sentinel that stands in its place. A value holding sentinels (a macro's
// text) gets their values back: it is quoted as a whole.
func (m *marks) add(pos int, x any) string {
	key := m.prefix + strconv.Itoa(len(m.values)) + "q"
	m.values[key] = m.resolve(x)
	m.at[key] = pos
	return key
}

func (m *marks) resolve(x any) any {
	switch t := x.(type) {
	case string:
		if !strings.Contains(t, m.prefix) {
			return t
		}
		for k, v := range m.values {
			if strings.Contains(t, k) {
				s, _ := valuetext.Text(v)
				t = strings.ReplaceAll(t, k, s)
			}
		}
		return t
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = m.resolve(v)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[k] = m.resolve(v)
		}
		return out
	}
	return x
}

// RenderScript renders src, a script in lang, with every {{ }} value
// quoted as data for the place it stands in (`{{ x | raw }}` excepted).
// A value no quoting can hold there (a NUL byte, a here-document's
// delimiter line), or a placeholder that {% if %} or {% for %} put where
// no quoting is sound, fails naming the expression, never the value.
func (s *Set) RenderScript(ctx context.Context, src string, vars map[string]any, lang quoting.Lang) (out string, err error) {
	if !IsTemplate(src) {
		return src, nil
	}
	t, err := s.Parse(src)
	if err != nil {
		return "", err
	}
	defer recoverError(t.src, &err)
	b := newBudget(ctx)
	b.marks = newMarks()
	w := &limitedWriter{b: b}
	if err := t.tpl.Execute(w, t.context(vars, b)); err != nil || b.tripped != nil {
		return "", b.failure(t.src, err)
	}
	out = w.buf.String()
	if len(b.marks.values) > 0 {
		spliced, err := quoting.Splice(lang, out, b.marks.values)
		if err != nil {
			return "", t.scriptError(lang, out, b.marks, err)
		}
		out = spliced
	}
	if strings.Contains(strings.ToLower(out), b.marks.prefix) {
		return "", fmt.Errorf("template %s: a {%% filter %%} block changed the placeholder of a {{ }} value in it: apply the filter to the value instead ({{ x | upper }})", quote(t.src))
	}
	return out, nil
}

// scriptError names the expression a splice refused, and says whether
// the load-time check could have seen it.
func (t *Template) scriptError(lang quoting.Lang, out string, m *marks, err error) error {
	var p quoting.Problem
	if !errors.As(err, &p) {
		return fmt.Errorf("template %s: %w", quote(t.src), err)
	}
	at, named := m.at[p.Sentinel]
	tag, ok := tagAt(t.src, at)
	if !named || !ok {
		return fmt.Errorf("template %s: %s", quote(t.src), p.Message)
	}
	msg := fmt.Sprintf("%s (line %d): %s", tag.Text, tag.Line, p.Message)
	for _, q := range quoting.Check(lang, out, []string{p.Sentinel}) {
		if q.Sentinel == p.Sentinel {
			// The placement, not the value, is the problem: {% if %} or
			// {% for %} made a script the load-time check never saw.
			msg += "; " + tag.suggestion() + " (found at render time: {% if %} and {% for %} can change a script's shape, so the load-time check cannot see every placement)"
			break
		}
	}
	return fmt.Errorf("template %s: %s", quote(t.src), msg)
}

// Tag is one {{ }} of a template as written.
type Tag struct {
	Line, Col int    // of its {{, 1-based
	Text      string // e.g. {{ input.name }}
	Raw       bool   // its last filter is raw: the value goes in as written
	pos       int    // byte offset of its {{
}

// suggestion says how to hand the value to the script as data instead.
func (t Tag) suggestion() string {
	refs, _ := References(t.Text)
	if len(refs) == 1 && len(refs[0].Path) == 2 && refs[0].Path[0] == "input" {
		return fmt.Sprintf(`write "$%s" instead: each input is in the environment as data`, quoting.InputEnvName(refs[0].Path[1]))
	}
	return `pass the value through env: (env: {VALUE: "` + t.Text + `"}) and write "$VALUE" instead`
}

// Tags lists the {{ }} of src in order, as the lexer finds them.
func Tags(src string) []Tag {
	tags, _ := shape(src, "")
	return tags
}

func tagAt(src string, pos int) (Tag, bool) {
	for _, t := range Tags(src) {
		if t.pos == pos {
			return t, true
		}
	}
	return Tag{}, false
}

// shape is src with each {{ }} (but raw ones) replaced by prefix and its
// index, and {% %} and {# #} tags left out: at load time, the script a
// render would make, with every branch and one pass of every loop.
// With an empty prefix only the tags are listed.
func shape(src, prefix string) ([]Tag, *shapeText) {
	var tags []Tag
	out := &shapeText{}
	if lexTrap(src) >= 0 {
		return nil, out // Parse refuses it (a lexer that would hang)
	}
	stream := tokens.LexAll(src, gonjaConfig)
	input := normalizedSource(src)
	next := func() *tokens.Token {
		if stream.End() {
			return nil
		}
		return stream.Next()
	}
	for tok := next(); tok != nil; tok = next() {
		switch tok.Type {
		case tokens.Data:
			out.add(tok, tok.Val)
		case tokens.VariableBegin:
			var last, beforeLast *tokens.Token
			end := tok
			for end = next(); end != nil && end.Type != tokens.VariableEnd; end = next() {
				beforeLast, last = last, end
			}
			tag := Tag{Line: tok.Line, Col: tok.Col, pos: tok.Pos}
			if end != nil && end.Type == tokens.VariableEnd && end.Pos+len(end.Val) <= len(input) {
				tag.Text = input[tok.Pos : end.Pos+len(end.Val)]
			}
			tag.Raw = last != nil && last.Type == tokens.Name && last.Val == "raw" && beforeLast != nil && beforeLast.Type == tokens.Pipe
			tags = append(tags, tag)
			if prefix != "" && !tag.Raw {
				out.add(tok, prefix+strconv.Itoa(len(tags)-1)+"q")
				out.sentinels = append(out.sentinels, prefix+strconv.Itoa(len(tags)-1)+"q")
				out.tagOf = append(out.tagOf, len(tags)-1)
			}
		case tokens.BlockBegin:
			out.control = true
			for tok = next(); tok != nil && tok.Type != tokens.BlockEnd; tok = next() {
			}
		case tokens.CommentBegin:
			for tok = next(); tok != nil && tok.Type != tokens.CommentEnd; tok = next() {
			}
		}
	}
	return tags, out
}

// normalizedSource is src as the lexer reads it (its positions count in it).
func normalizedSource(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	return strings.ReplaceAll(src, "\r", "\n")
}

// shapeText is the text shape builds, with where each piece came from.
type shapeText struct {
	b         strings.Builder
	sentinels []string
	tagOf     []int // index in the tags of each sentinel
	control   bool  // the template has {% %} tags
	pieces    []piece
}

type piece struct {
	off       int // in the shape
	line, col int // in the template
}

func (s *shapeText) add(tok *tokens.Token, text string) {
	s.pieces = append(s.pieces, piece{off: s.b.Len(), line: tok.Line, col: tok.Col})
	s.b.WriteString(text)
}

// lineCol maps an offset of the shape back to the template.
func (s *shapeText) lineCol(off int) (int, int) {
	text := s.b.String()
	for i := len(s.pieces) - 1; i >= 0; i-- {
		p := s.pieces[i]
		if p.off > off {
			continue
		}
		line, col := p.line, p.col
		for _, r := range text[p.off:min(off, len(text))] {
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return line, col
	}
	return 1, 1
}

// ScriptProblem is a placeholder of a script no quoting can make safe, at
// its line and column in the template.
type ScriptProblem struct {
	Line, Col int
	Msg       string
}

// CheckScript finds, at load time, the {{ }} of src (a script in lang)
// that stand where no quoting is sound: a command name, arithmetic, eval's
// arguments... With {% %} tags the script's shape depends on the values,
// so what this cannot see fails at render time instead.
func CheckScript(src string, lang quoting.Lang) []ScriptProblem {
	if !IsTemplate(src) {
		return nil
	}
	tags, sh := shape(src, newMarks().prefix)
	if len(sh.sentinels) == 0 {
		return nil
	}
	var out []ScriptProblem
	for _, p := range quoting.Check(lang, sh.b.String(), sh.sentinels) {
		i := indexOf(sh.sentinels, p.Sentinel)
		if i < 0 {
			if sh.control {
				continue // a shape with every branch need not parse: the render judges
			}
			line, col := sh.lineCol(p.Offset)
			out = append(out, ScriptProblem{Line: line, Col: col, Msg: p.Message})
			continue
		}
		tag := tags[sh.tagOf[i]]
		out = append(out, ScriptProblem{Line: tag.Line, Col: tag.Col, Msg: fmt.Sprintf("%s: %s; %s", tag.Text, p.Message, tag.suggestion())})
	}
	return out
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}
