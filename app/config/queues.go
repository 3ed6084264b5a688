package config

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// MaxQueueLimit bounds a queue's limit: a higher one limits nothing.
const MaxQueueLimit = 10000

// Queue is one entry of the queues section: at most Limit jobs of the
// tasks that join it run at once (default 1: one at a time).
type Queue struct {
	Limit int `yaml:"limit"`
}

var queueNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func validateQueues(qs map[string]Queue) error {
	for _, name := range QueueNames(qs) {
		if !queueNameRe.MatchString(name) {
			return fmt.Errorf("queues.%s: a queue name is 1 to 64 letters, digits, - and _", name)
		}
		q := qs[name]
		if q.Limit == 0 {
			q.Limit = 1
			qs[name] = q
		}
		if l := q.Limit; l < 1 || l > MaxQueueLimit {
			return fmt.Errorf("queues.%s.limit: must be between 1 and %d, got %d", name, MaxQueueLimit, l)
		}
	}
	return nil
}

// QueueNames lists the queues' names in order.
func QueueNames(qs map[string]Queue) []string {
	names := make([]string, 0, len(qs))
	for name := range qs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// QueueLimits maps each queue to its limit, for the engine.
func (c *Server) QueueLimits() map[string]int {
	out := make(map[string]int, len(c.Queues))
	for name, q := range c.Queues {
		out[name] = q.Limit
	}
	return out
}

// DescribeQueues is the queues section for the start-up summary.
func DescribeQueues(qs map[string]Queue) string {
	if len(qs) == 0 {
		return "none (tasks may still limit their own jobs with concurrency)"
	}
	parts := make([]string, 0, len(qs))
	for _, name := range QueueNames(qs) {
		parts = append(parts, fmt.Sprintf("%s (limit %d)", name, qs[name].Limit))
	}
	return strings.Join(parts, ", ")
}
