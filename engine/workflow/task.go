package workflow

import (
	"strings"
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// Timeout limits of the format.
const (
	MaxTaskTimeout = 7 * 24 * time.Hour
	MaxStepTimeout = 24 * time.Hour
)

// RendersConcurrency reports whether a job of the task renders its
// concurrency key or priority with the template engine: a template that
// only names one input (InputRef) is read without it.
func (t *Task) RendersConcurrency() bool {
	c := t.Concurrency
	return c != nil && (rendered(c.Key) || rendered(c.Priority))
}

func rendered(s string) bool {
	if !template.IsTemplate(s) {
		return false
	}
	_, ok := InputRef(s)
	return !ok
}

// InputRef reports whether a template is exactly one input's value,
// `{{ input.NAME }}`, and names the input: the common key and priority,
// read from the input without a render (a hand-written match: it runs for
// every job of such a task).
func InputRef(s string) (string, bool) {
	inner, ok := strings.CutPrefix(s, "{{")
	if !ok {
		return "", false
	}
	if inner, ok = strings.CutSuffix(inner, "}}"); !ok {
		return "", false
	}
	name, ok := strings.CutPrefix(strings.TrimSpace(inner), "input.")
	if !ok || name == "" {
		return "", false
	}
	for i, r := range name {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return "", false
		}
	}
	return name, true
}
