package quote

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// site is one sentinel occurrence in a script.
type site struct {
	sentinel string
	off      int
}

func (s site) end() int { return s.off + len(s.sentinel) }

// problem builds the Problem of a site.
func (s site) problem(format string, args ...any) Problem {
	return Problem{Sentinel: s.sentinel, Offset: s.off, Message: fmt.Sprintf(format, args...)}
}

// edit replaces src[start:end] with what render makes of the values.
type edit struct {
	start, end int
	render     func(values map[string]any) (string, error)
}

// analyzer finds the context of each site of src: an edit per site (or per
// group of sites a context replaces as a whole), or a Problem.
type analyzer func(src string, sites []site) ([]edit, []Problem)

// langSplicer is the splicer of a language whose analyzer does the work.
type langSplicer struct{ analyze analyzer }

func (l langSplicer) splice(src string, values map[string]any) (string, error) {
	sites, err := findSites(src, slices.Collect(maps.Keys(values)))
	if err != nil {
		return "", err
	}
	edits, problems := l.analyze(src, sites)
	if len(problems) > 0 {
		return "", problems[0]
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(src))
	at := 0
	for _, e := range edits {
		text, err := e.render(values)
		if err != nil {
			return "", err
		}
		b.WriteString(src[at:e.start])
		b.WriteString(text)
		at = e.end
	}
	b.WriteString(src[at:])
	return b.String(), nil
}

func (l langSplicer) check(src string, sentinels []string) []Problem {
	sites, err := findSites(src, sentinels)
	if err != nil {
		return []Problem{{Message: err.Error()}}
	}
	_, problems := l.analyze(src, sites)
	return problems
}

// findSites returns every occurrence of the sentinels in src, in order.
// The language splicers need sentinels shaped like identifiers, so that a
// sentinel standing alone in code lexes as one name, and one standing in
// a string or comment cannot end it.
func findSites(src string, sentinels []string) ([]site, error) {
	var sites []site
	for _, s := range sentinels {
		if !isSentinel(s) {
			return nil, fmt.Errorf("quote: sentinel %q must be ASCII letters, digits and underscores, not starting with a digit", s)
		}
		for i := 0; ; {
			j := strings.Index(src[i:], s)
			if j < 0 {
				break
			}
			sites = append(sites, site{sentinel: s, off: i + j})
			i += j + len(s)
		}
	}
	// Where one sentinel holds another (S_1 in S_10), the longer is the
	// occurrence.
	slices.SortFunc(sites, func(a, b site) int {
		if a.off != b.off {
			return a.off - b.off
		}
		return len(b.sentinel) - len(a.sentinel)
	})
	kept := sites[:0]
	for _, s := range sites {
		if len(kept) == 0 || s.off >= kept[len(kept)-1].end() {
			kept = append(kept, s)
		}
	}
	return kept, nil
}

func isSentinel(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !isAlnum(c) {
			return false
		}
	}
	return true
}

// number writes a finite float as JSON does ("3", "1.5", "1e+21"), which
// python, javascript and go all read as a number literal.
func number(f float64) string {
	b, _ := json.Marshal(f) // finite floats always encode
	return string(b)
}

// plainValue reduces any value to the shapes the literal writers know
// (string, bool, float64, int, int64, nil, []any, map[string]any) through
// JSON: values from templates already have those shapes, this is for the
// odd typed slice or map a caller passes.
func plainValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("quote: encode %T as JSON: %w", v, err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("quote: decode %T from JSON: %w", v, err)
	}
	return out, nil
}

// listItems writes each value of a list as a literal of the script's
// language (lit), separated by ", ".
func listItems(list []any, lit func(any) (string, error)) (string, error) {
	parts := make([]string, len(list))
	for i, x := range list {
		s, err := lit(x)
		if err != nil {
			return "", err
		}
		parts[i] = s
	}
	return strings.Join(parts, ", "), nil
}

// sortedKeys returns m's keys in order, so a spliced script is the same
// for the same values.
func sortedKeys(m map[string]any) []string {
	return slices.Sorted(maps.Keys(m))
}

// overlaps reports whether a site overlaps one of the [start, end) ranges.
func (s site) overlaps(ranges [][2]int) bool {
	for _, r := range ranges {
		if s.off < r[1] && r[0] < s.end() {
			return true
		}
	}
	return false
}

// requireUTF8 refuses a value a source file cannot hold as text.
func requireUTF8(s site, v string, lang string) error {
	if !utf8.ValidString(v) {
		return s.problem("the value of this placeholder is not valid UTF-8, which a %s string literal cannot hold byte for byte", lang)
	}
	return nil
}

// eachSite runs one site's analysis over every site: an edit for each the
// analysis can quote, a Problem for each it cannot.
func eachSite(sites []site, analyze func(site) (edit, *Problem)) ([]edit, []Problem) {
	var edits []edit
	var problems []Problem
	for _, s := range sites {
		e, p := analyze(s)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		edits = append(edits, e)
	}
	return edits, problems
}
