package workflow

import (
	"math"
	"time"
)

// Retry limits and defaults of the format.
const (
	MaxRetries          = 10
	DefaultRetryDelay   = 10 * time.Second
	DefaultRetryBackoff = 2.0
	MaxRetryDelay       = 5 * time.Minute
)

// RetrySpec holds the retry fields written on a step or an action; nil
// fields were not written.
type RetrySpec struct {
	Retries      *int      `json:"retries,omitempty"`
	RetryDelay   *Duration `json:"retry_delay,omitempty"`
	RetryBackoff *float64  `json:"retry_backoff,omitempty"`
}

// RetryPolicy is a step's effective retry policy.
type RetryPolicy struct {
	Retries int           // extra attempts after the first
	Delay   time.Duration // before the second attempt
	Backoff float64       // multiplier of the delay per further attempt
}

// Attempts is the most attempts a step makes.
func (p RetryPolicy) Attempts() int { return 1 + p.Retries }

// DelayAfter is the wait before the attempt that follows failed attempt n
// (1-based): Delay * Backoff^(n-1), capped at MaxRetryDelay.
func (p RetryPolicy) DelayAfter(n int) time.Duration {
	d := float64(p.Delay) * math.Pow(p.Backoff, float64(n-1))
	if math.IsInf(d, 0) || math.IsNaN(d) || d > float64(MaxRetryDelay) {
		return MaxRetryDelay
	}
	return time.Duration(d)
}

// StepRetry is the retry policy of a flow step running action a: each
// field written on the step wins over the action's, and the format's
// defaults fill the rest.
func StepRetry(s *FlowStep, a *Action) RetryPolicy {
	p := RetryPolicy{Delay: DefaultRetryDelay, Backoff: DefaultRetryBackoff}
	var layers []*RetrySpec
	if a != nil {
		layers = append(layers, &a.RetrySpec)
	}
	if s != nil {
		layers = append(layers, &s.RetrySpec)
	}
	for _, r := range layers {
		if r.Retries != nil {
			p.Retries = *r.Retries
		}
		if r.RetryDelay != nil {
			p.Delay = r.RetryDelay.Std()
		}
		if r.RetryBackoff != nil {
			p.Backoff = *r.RetryBackoff
		}
	}
	return p
}

// Written reports whether any retry field was written.
func (r RetrySpec) Written() bool {
	return r.Retries != nil || r.RetryDelay != nil || r.RetryBackoff != nil
}
