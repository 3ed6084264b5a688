package workflow

import (
	"time"

	"github.com/appliance-sh/appliance/engine/template"
)

// Timeout limits of the format.
const (
	MaxTaskTimeout = 7 * 24 * time.Hour
	MaxStepTimeout = 24 * time.Hour
)

// RendersConcurrency reports whether a job of the task renders its
// concurrency key or priority from its input.
func (t *Task) RendersConcurrency() bool {
	c := t.Concurrency
	return c != nil && (template.IsTemplate(c.Key) || template.IsTemplate(c.Priority))
}
